#!/usr/bin/env python3
"""Every non-template class and every namespace-scope function declared (not
defined inline) in a public header carries COMPACTION_EXPORT.

The shared libcompaction.so.0 is compiled with -fvisibility=hidden: an
unmarked declaration links in the static build and the tests, and fails only
in a shared build's consumers (packaging.debs). This finds it in every build.

usage: check_export_marks.py lib/include/compaction
"""
import pathlib
import re
import sys

root = pathlib.Path(sys.argv[1])
problems = []
for path in sorted(root.rglob("*.hpp")):
    if path.name == "export.hpp":
        continue
    lines = path.read_text().split("\n")
    depth = 0  # braces outside namespaces: > 0 inside a class or function
    for i, line in enumerate(lines):
        code = line.split("//")[0]
        prev = lines[i - 1] if i else ""
        at_scope = depth == 0
        if at_scope and re.match(r"^(class|struct) (?!COMPACTION_EXPORT)\w+ *(final *)?[:{]", code) \
                and not prev.startswith("template") and code.startswith("class"):
            problems.append(f"{path}:{i + 1}: class without COMPACTION_EXPORT: {line.strip()}")
        if at_scope and re.match(r"^(?!COMPACTION_EXPORT|inline|constexpr|template|using|namespace|class|struct|enum|return|#|\s)"
                                 r"[\w:<>,* ]+[ *&]([A-Z]\w*)\(", code):
            # A declaration ends in ';' before any '{'.
            j = i
            while j < len(lines) and not re.search(r"[;{]", lines[j].split("//")[0]):
                j += 1
            end = lines[j].split("//")[0] if j < len(lines) else ""
            if ";" in end and "{" not in end and not prev.startswith("template"):
                problems.append(f"{path}:{i + 1}: function without COMPACTION_EXPORT: {line.strip()}")
        opens = code.count("{") - code.count("}")
        if re.match(r"^\s*namespace\b", code) or re.match(r"^\}\s*//\s*namespace", code):
            continue
        depth += opens
for p in problems:
    print("FAIL", p)
print(f"{len(problems)} unmarked declarations in {root}")
sys.exit(1 if problems else 0)
