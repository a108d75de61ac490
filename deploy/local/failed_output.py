"""Prints the last lines of each failed test's output from ctest's
Testing/Temporary/LastTest.log (deploy/local/test.sh calls it after a failed
run, so the reason is at the end of the log).

    failed_output.py LAST_TEST_LOG [LINES]
"""

import re
import sys


def failed_sections(text):
    # Each test's section runs from "N/M Testing: NAME" to its "Test Failed."
    # or "Test Passed." line.
    for m in re.finditer(r"^\d+/\d+ Testing: (.+?)\n(.*?)^Test (Passed|Failed)",
                         text, re.S | re.M):
        if m.group(3) == "Failed":
            yield m.group(1), m.group(2)


def main():
    path = sys.argv[1]
    lines = int(sys.argv[2]) if len(sys.argv) > 2 else 60
    with open(path, errors="replace") as f:
        text = f.read()
    for name, body in failed_sections(text):
        tail = body.rstrip().splitlines()[-lines:]
        print(f"==== {name}: last {len(tail)} lines of its output ====")
        print("\n".join(tail))
    return 0


if __name__ == "__main__":
    sys.exit(main())
