#!/usr/bin/env python3
"""The documentation holds together: README.md and doc/*.md.

  check_docs.py --repo ROOT links
  check_docs.py --repo ROOT --binary COMPACTIOND commands

links: every relative link resolves to a file or directory of the
repository, and every #anchor to a heading (GitHub's slugs) of the file it
names (or of the same file).

commands: every `compactiond ...` command line the documents show (in shell
code blocks and in inline code, synopses with [optional] parts and
PLACEHOLDERS included) is one the real binary knows. Each is run with
--check-config (the options and their values parse), then, unless it is
`run`, for real against a database that does not exist: a known command
gets as far as connecting and fails there (exit 1); an unknown command or
option exits 2 with the daemon's usage error. A command line that passes a
password on the command line must be refused as the documents say.
"""
import argparse
import os
import re
import shlex
import subprocess
import sys

NOWHERE = "/nonexistent/compaction-docs-check"


def documents(repo):
    out = [os.path.join(repo, "README.md")]
    doc = os.path.join(repo, "doc")
    out += sorted(
        os.path.join(doc, f) for f in os.listdir(doc) if f.endswith(".md"))
    return out


FENCE = re.compile(r"^\s*(```|~~~)")


def split_fences(text):
    """Yields (in_code, language, line) for each line."""
    in_code, lang = False, ""
    for line in text.splitlines():
        m = FENCE.match(line)
        if m:
            if in_code:
                in_code = False
                yield True, lang, None  # closing fence
            else:
                in_code, lang = True, line.strip()[3:].strip().lower()
            continue
        yield in_code, lang, line


def slug(heading):
    """GitHub's anchor for a heading text."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # links: text
    text = text.replace("`", "").strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path, cache={}):
    if path not in cache:
        seen = {}
        found = set()
        with open(path, encoding="utf-8") as f:
            for in_code, _, line in split_fences(f.read()):
                if in_code or line is None:
                    continue
                m = re.match(r"^(#{1,6})\s+(.*?)\s*#*\s*$", line)
                if m:
                    base = slug(m.group(2))
                    n = seen.get(base, 0)
                    seen[base] = n + 1
                    found.add(base if n == 0 else f"{base}-{n}")
                for a in re.findall(r"<a\s+(?:name|id)=\"([^\"]+)\"", line):
                    found.add(a)
        cache[path] = found
    return cache[path]


LINK = re.compile(r"\[[^\]]*\]\(([^()\s]+)(?:\s+\"[^\"]*\")?\)")


def check_links(repo):
    errors, checked = [], 0
    for doc in documents(repo):
        with open(doc, encoding="utf-8") as f:
            text = f.read()
        for number, (in_code, _, line) in enumerate(split_fences(text), 1):
            if in_code or line is None:
                continue
            for target in LINK.findall(re.sub(r"`[^`]*`", "", line)):
                if re.match(r"^[a-z][a-z0-9+.-]*:", target):
                    continue  # http:, https:, mailto:
                checked += 1
                where = f"{os.path.relpath(doc, repo)}: link '{target}'"
                path, _, anchor = target.partition("#")
                dest = doc if not path else os.path.normpath(
                    os.path.join(os.path.dirname(doc), path))
                if not os.path.exists(dest):
                    errors.append(f"{where}: no such file")
                    continue
                if os.path.commonpath([dest, repo]) != repo:
                    errors.append(f"{where}: outside the repository")
                    continue
                if anchor:
                    if not dest.endswith(".md"):
                        errors.append(f"{where}: anchor into a non-markdown file")
                    elif anchor not in anchors(dest):
                        errors.append(f"{where}: no heading '#{anchor}' in "
                                      f"{os.path.relpath(dest, repo)}")
    return checked, errors


SHELL = {"sh", "bash", "console", "shell", ""}


def command_lines(repo):
    """(where, text) of every compactiond command line in the documents."""
    out = []
    for doc in documents(repo):
        with open(doc, encoding="utf-8") as f:
            text = f.read()
        rel = os.path.relpath(doc, repo)
        for in_code, lang, line in split_fences(text):
            if line is None:
                continue
            if in_code:
                if lang not in SHELL:
                    continue
                line = re.sub(r"^\s*\$\s+", "", line)
                if re.match(r"^\s*compactiond(\s|$)", line):
                    out.append((rel, line.strip()))
                continue
            for span in re.findall(r"`([^`]+)`", line):
                if re.match(r"^compactiond(\s|$)", span):
                    out.append((rel, span))
    return out


PLACEHOLDERS = {
    "NAME": "docs-check",
    "FILE": None,  # the repository's config file, below
    "CONNINFO": f"host={NOWHERE}",
    "HOST:PORT": "127.0.0.1:0",
    "DURATION": "1h",
    "P": "docs_check",
}


def expand(line, config_file):
    """A synopsis as one concrete command line: every [optional] part
    given, the first of a|b, placeholders filled in."""
    line = line.replace("\\|", "|")
    line = line.replace("[", " ").replace("]", " ")
    words = []
    for w in shlex.split(line, comments=True):
        if "|" in w:
            w = w.split("|")[0]
        base = w[:-3] if w.endswith("...") else w
        if base in PLACEHOLDERS:
            w = PLACEHOLDERS[base] or config_file
        words.append(w)
    return words


def concrete(words, config_file):
    """Points the database options at nothing and the config file at the
    repository's; returns the new words."""
    out = list(words)
    for i, w in enumerate(out[:-1]):
        if w == "--db" and not re.search(r"password", out[i + 1]):
            out[i + 1] = f"host={NOWHERE}"
        if w == "--config" and not os.path.exists(out[i + 1]):
            out[i + 1] = config_file
    return out


def run(binary, words, env):
    return subprocess.run([binary] + words[1:], env=env, capture_output=True,
                          text=True, timeout=60)


def check_commands(repo, binary):
    config_file = os.path.join(repo, "config", "compactiond.conf")
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("COMPACTIOND_", "PG"))}
    env.update(PGHOST=NOWHERE, PGCONNECT_TIMEOUT="2", PGDATABASE="nowhere",
               PGUSER="nobody", PGPASSFILE="/dev/null")
    errors, seen = [], set()
    for where, line in command_lines(repo):
        words = concrete(expand(line, config_file), config_file)
        key = tuple(words)
        if key in seen:
            continue
        seen.add(key)
        shown = f"{where}: `{line}`"
        if any(re.search(r"(^|\s)(ssl)?password=|://[^/@]*:[^/@]*@", w)
               for w in words):
            r = run(binary, words, env)
            if r.returncode != 2 or "visible" not in r.stderr:
                errors.append(f"{shown}: a password on the command line was "
                              f"not refused (exit {r.returncode}): {r.stderr}")
            continue
        if {"--help", "-h", "--version"} & set(words) or \
                {"--check-config", "--print-config"} & set(words):
            r = run(binary, words, env)
            if r.returncode != 0:
                errors.append(f"{shown}: exit {r.returncode}: {r.stderr.strip()}")
            continue
        r = run(binary, words + ["--check-config"], env)
        if r.returncode != 0:
            errors.append(f"{shown}: --check-config exit {r.returncode}: "
                          f"{r.stderr.strip()}")
            continue
        # compactiond's first positional words that are options' values are
        # not subcommands; 'run' (the default) would start the daemon.
        flags_with_value = {"--db", "--config", "--schema", "--listen",
                            "--headless-ttl", "--retention",
                            "--tombstone-retention", "--role-prefix",
                            "--partitions"}
        command, skip = [], False
        for w in words[1:]:
            if skip:
                skip = False
                continue
            if w in flags_with_value:
                skip = True
                continue
            if not w.startswith("-"):
                command.append(w)
        if not command or command[0] == "run":
            continue
        r = run(binary, words, env)
        if (r.returncode == 2 and "usage:" in r.stderr and
                len(words) - 1 == len(command) <= 2):
            continue  # a mention of a known command without its arguments
        if r.returncode == 2 or "unknown command" in r.stderr:
            errors.append(f"{shown}: not a command compactiond knows "
                          f"(exit {r.returncode}): {r.stderr.strip()}")
        elif r.returncode not in (0, 1):
            errors.append(f"{shown}: exit {r.returncode}: {r.stderr.strip()}")
    return len(seen), errors


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repo", required=True)
    ap.add_argument("--binary")
    ap.add_argument("check", choices=["links", "commands"])
    args = ap.parse_args()
    repo = os.path.realpath(args.repo)
    if args.check == "links":
        checked, errors = check_links(repo)
        what = "relative links"
    else:
        if not args.binary:
            ap.error("commands needs --binary")
        checked, errors = check_commands(repo, args.binary)
        what = "compactiond command lines"
    for e in errors:
        print("FAIL", e)
    print(f"{checked} {what} checked, {len(errors)} failed")
    if checked == 0:
        print("FAIL nothing found to check")
        return 1
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
