#!/usr/bin/env bash
# Scrape a running compactiond and lint what it serves.
#
#   test/deploy/check_metrics_scrape.sh http://127.0.0.1:9473/metrics
#
# Fails (exit 1) when the scrape fails, when `promtool check metrics` prints
# anything (it only prints problems: missing HELP, counters without _total,
# non-base units...; the daemon documents every metric, so any line is a
# regression), when a family the daemon always exports is missing, or when a
# compaction_* series carries a label outside the contract (a message key
# there would explode cardinality).  file:// URLs work too, which is how
# check_deploy.sh tests this script against testdata/metrics.prom.
# Prints one line per check; a missing tool prints "SKIP ..." and passes.
set -euo pipefail

if [[ $# -ne 1 ]]; then
  echo "usage: $0 URL" >&2
  exit 2
fi
url=$1

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
body=$tmp/metrics

fail() { echo "FAIL $*"; exit 1; }

# --- fetch --------------------------------------------------------------------
if command -v curl >/dev/null 2>&1; then
  curl -fsS --max-time 10 -o "$body" "$url" || fail "scrape $url: curl failed"
elif command -v python3 >/dev/null 2>&1; then
  python3 - "$url" "$body" <<'PY' || fail "scrape $url: python3 urllib failed"
import sys, urllib.request
with urllib.request.urlopen(sys.argv[1], timeout=10) as r, open(sys.argv[2], "wb") as f:
    f.write(r.read())
PY
else
  fail "scrape $url: neither curl nor python3 available"
fi
[[ -s $body ]] || fail "scrape $url: empty body"
echo "OK   scrape $url ($(wc -l <"$body") lines)"

# --- promtool lint ------------------------------------------------------------
if command -v promtool >/dev/null 2>&1; then
  # promtool exits 3 on lint problems but also prints them; capture both
  # streams and judge by output so warnings are not lost either.
  rc=0
  lint=$(promtool check metrics <"$body" 2>&1) || rc=$?
  if [[ $rc -ne 0 || -n $lint ]]; then
    # shellcheck disable=SC2001  # prefixes every line of a multi-line value
    sed 's/^/     promtool: /' <<<"$lint"
    fail "promtool check metrics (exit $rc)"
  fi
  echo "OK   promtool check metrics"
else
  echo "SKIP promtool check metrics: promtool not installed"
fi

# --- contract -----------------------------------------------------------------
if command -v python3 >/dev/null 2>&1; then
  python3 - "$body" <<'PY' || fail "metrics contract"
import re, sys

# Families present from the first scrape on, whatever the topic count.
required = [
    "compaction_up", "compaction_ready", "compaction_build_info",
    "compaction_topics", "compaction_stats_refresh_failures_total",
    "compaction_stats_last_refresh_timestamp_seconds",
]
# The only labels compaction_* series may carry; compaction_consumer_*
# also carry `consumer` (a consumer name: consumers are few).
allowed_labels = {"topic", "le", "version"}

types, problems = {}, []
sample = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s')
label = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="(?:[^"\\]|\\.)*"')
for line in open(sys.argv[1], encoding="utf-8"):
    if line.startswith("# TYPE "):
        _, _, name, kind = line.split(None, 3)
        types[name] = kind.strip()
        continue
    m = sample.match(line)
    if not m or not m.group(1).startswith("compaction_"):
        continue
    for name in label.findall(m.group(3) or ""):
        if name == "consumer" and m.group(1).startswith("compaction_consumer_"):
            continue
        if name not in allowed_labels:
            problems.append(f"{m.group(1)} has label {name!r}")

for name in required:
    if name not in types:
        problems.append(f"family {name} missing")
for p in sorted(set(problems)):
    print(f"     contract: {p}")
sys.exit(1 if problems else 0)
PY
  echo "OK   metrics contract (required families, labels topic/le/version, consumer on compaction_consumer_*)"
else
  echo "SKIP metrics contract: python3 not installed"
fi
