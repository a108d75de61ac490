#!/usr/bin/env python3
"""The README's quick start is real: its C++ block is
doc/examples/quickstart.cpp byte for byte, and the program, built from that
file and run twice on a database of its own, prints exactly the README's
output block both times.

  check_quickstart.py BINARY REPO

Needs the PG* variables of a cluster where it may create a database.
"""
import os
import re
import subprocess
import sys


def blocks(text):
    """(language, content) of every fenced code block, in order."""
    return [(m.group(1), m.group(2)) for m in re.finditer(
        r"^```(\w*)\n(.*?)^```\s*$", text, re.S | re.M)]


def psql(sql, db="postgres"):
    subprocess.run(["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", db,
                    "-c", sql], check=True)


def main():
    binary, repo = sys.argv[1], sys.argv[2]
    with open(os.path.join(repo, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    with open(os.path.join(repo, "doc/examples/quickstart.cpp"),
              encoding="utf-8") as f:
        program = f.read()
    found = blocks(readme)
    index = next((i for i, (lang, body) in enumerate(found)
                  if lang == "cpp" and "int main(" in body), None)
    if index is None:
        print("FAIL README.md shows no C++ program with main")
        return 1
    if found[index][1] != program:
        print("FAIL README.md's program differs from doc/examples/quickstart.cpp")
        return 1
    output = next((body for lang, body in found[index + 1:] if lang == "text"),
                  None)
    if output is None:
        print("FAIL README.md shows no ```text output after its program")
        return 1

    db = f"docs_quickstart_{os.getpid()}"
    psql(f'CREATE DATABASE "{db}"')
    try:
        env = dict(os.environ, PGDATABASE=db)
        for run in (1, 2):
            r = subprocess.run([binary], env=env, capture_output=True,
                               text=True, timeout=300)
            if r.returncode != 0 or r.stdout != output:
                print(f"FAIL run {run}: exit {r.returncode}\n--- printed:\n"
                      f"{r.stdout}--- README.md shows:\n{output}"
                      f"--- stderr:\n{r.stderr}")
                return 1
            print(f"OK   run {run} printed what README.md shows")
    finally:
        psql(f'DROP DATABASE "{db}" WITH (FORCE)')
    return 0


if __name__ == "__main__":
    sys.exit(main())
