#!/usr/bin/env bash
# Formatting check of the C++ sources (about two seconds):
#  1. no line of lib/ or daemon/ is longer than .clang-format's ColumnLimit
#     (counted in characters, as clang-format does);
#  2. clang-format-14 --dry-run -Werror passes on every C++ file of lib/,
#     daemon/ and test/ (daemon/asio.hpp keeps its include order with
#     "clang-format off").
set -euo pipefail
cd "$(dirname "$0")/.."

limit=$(awk -F': *' '$1 == "ColumnLimit" {print $2}' .clang-format)
mapfile -t files < <(git ls-files 'lib/*.cpp' 'lib/*.hpp' 'daemon/*.cpp' \
                                  'daemon/*.hpp')
mapfile -t tests < <(git ls-files 'test/*.cpp' 'test/*.hpp')
status=0
python3 - "$limit" "${files[@]}" <<'PY' || status=1
import sys
limit = int(sys.argv[1])
bad = 0
for path in sys.argv[2:]:
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if len(line.rstrip("\n")) > limit:
                print(f"{path}:{n}: {len(line.rstrip())} columns (limit {limit})")
                bad += 1
sys.exit(1 if bad else 0)
PY

# install-deps.sh installs it (with the rest of the build's packages).
command -v clang-format-14 >/dev/null || bash deploy/local/install-deps.sh
formatter=clang-format-14
for f in "${files[@]}" "${tests[@]}"; do
  "$formatter" --dry-run -Werror "$f" || status=1
done
if [[ $status -ne 0 ]]; then
  echo "format_check: failed (clang-format-14 -i FILE fixes the second kind)" >&2
fi
exit $status
