#!/usr/bin/env python3
"""Checks doc/compactiond.1 against what the binary says about itself.

Everything is derived from the program, so a new command, option or setting
(or a changed default) fails here until the man page describes it:
  - every command of `--help`'s "Commands:" list is a COMMANDS entry;
  - every option of `--help` is an OPTIONS or SETTINGS entry, and the man page
    names no option that `--help` lacks;
  - every setting (`--print-config` with no file) is a SETTINGS entry whose
    text ends in "Default: VALUE." with the built-in default, and a key of
    config/compactiond.conf;
  - every exit code of `--help`'s "Exit codes:" line is an EXIT STATUS entry;
  - every signal the daemon waits for (daemon/app.cpp's signal set) is in
    SIGNALS;
  - groff renders the page without a warning.

usage: check_manpage.py COMPACTIOND MANPAGE SOURCE_ROOT
"""
import os
import re
import subprocess
import sys


def run(*argv):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("COMPACTIOND_")}
    return subprocess.run(argv, check=True, capture_output=True, text=True,
                          env=env).stdout


def plain(line):
    """A roff source line as text: escapes and font changes removed."""
    line = line.replace("\\-", "-").replace("\\c", "")
    line = re.sub(r"\\f[BIRP]", "", line)
    line = re.sub(r"\\\(\w\w", " ", line)
    return line


def sections(man):
    """{SECTION: [(tag, body), ...]} from the .SH/.TP structure."""
    out, section, entry = {}, None, None
    lines = man.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith(".SH"):
            section = line[3:].strip().strip('"')
            out[section] = []
            entry = None
        elif line.startswith(".TP") and section:
            i += 1
            tag = plain(re.sub(r'^\.(BI|BR|IR|RB|B|I)\s*', "", lines[i]))
            entry = [tag.replace('"', "").strip(), ""]
            out[section].append(entry)
        elif entry is not None and not line.startswith(".\\\""):
            text = plain(re.sub(r'^\.(BI|BR|IR|RB|B|I)\s*', "", line))
            entry[1] += " " + text.replace('"', "").strip()
        i += 1
    return {k: [(t, re.sub(r"\s+", " ", b).strip()) for t, b in v]
            for k, v in out.items()}


def main():
    binary, manpage, root = sys.argv[1:4]
    man = open(manpage, encoding="utf-8").read()
    sec = sections(man)
    errors = []

    def need(cond, msg):
        if not cond:
            errors.append(msg)

    help_text = run(binary, "--help")
    # Commands: "  run   ...", "  topic register NAME... [...]".
    block = help_text.split("Commands:\n", 1)[1].split("\n\n", 1)[0]
    commands = []
    for line in block.splitlines():
        words = []
        for w in line.split():
            if w.startswith(("-", "[")) or w.isupper() or w.endswith("..."):
                break
            words.append(w)
            if len(words) == 2 or w in ("run", "stats", "sweep"):
                break
        commands.append(" ".join(words))
    need(commands, "no commands found in --help")
    tags = [t for t, _ in sec.get("COMMANDS", [])]
    for c in commands:
        need(any(t == c or t.startswith(c + " ") for t in tags),
             f"command '{c}' of --help has no COMMANDS entry")

    help_opts = set(re.findall(r"(?<![\w-])--[a-z][a-z-]*", help_text))
    help_opts |= set(re.findall(r"(?<![\w-])-[a-z](?=\s)", help_text))
    entry_opts = set()
    for s in ("OPTIONS", "SETTINGS"):
        for t, _ in sec.get(s, []):
            entry_opts |= set(re.findall(r"(?<![\w-])--?[a-z][a-z-]*", t))
    for o in sorted(help_opts - entry_opts):
        need(False, f"option {o} of --help has no OPTIONS/SETTINGS entry")
    man_opts = set(re.findall(r"(?<![\w-])--[a-z][a-z-]*",
                              plain(man)))
    for o in sorted(man_opts - help_opts):
        need(False, f"the man page names {o}, which --help does not know")

    # Settings and their defaults, as the program prints them.
    defaults = {}
    for line in run(binary, "--print-config", "--config", "/dev/null").splitlines():
        m = re.match(r"^([a-z][a-z-]*) = (.*?)\s+#", line)
        if m:
            defaults[m.group(1)] = m.group(2).strip()
    need(defaults, "no settings in --print-config")
    settings = {re.match(r"--([a-z-]+)", t).group(1): b
                for t, b in sec.get("SETTINGS", []) if t.startswith("--")}
    for key, value in defaults.items():
        body = settings.get(key)
        if body is None:
            need(False, f"setting '{key}' has no SETTINGS entry")
            continue
        want = value if value else "empty"
        m = re.search(r"Default: (.*?)\.?$", body)
        need(m and m.group(1).split(" (")[0] == want,
             f"setting '{key}': the man page says "
             f"'{m.group(1) if m else 'no default'}', the program '{want}'")
    for key in sorted(set(settings) - set(defaults)):
        need(False, f"SETTINGS entry '{key}' is no setting of the program")
    conf = open(os.path.join(root, "config/compactiond.conf")).read()
    conf_keys = set(re.findall(r"^([a-z][a-z-]*) =", conf, re.M))
    need(conf_keys == set(defaults),
         f"config/compactiond.conf keys differ from the settings: "
         f"{sorted(conf_keys ^ set(defaults))}")

    codes = re.search(r"Exit codes: (.*)", help_text)
    need(codes, "no 'Exit codes:' line in --help")
    exit_tags = {t for t, _ in sec.get("EXIT STATUS", [])}
    for code in re.findall(r"(\d+) [a-z]", codes.group(1) if codes else ""):
        need(code in exit_tags, f"exit code {code} has no EXIT STATUS entry")

    app = open(os.path.join(root, "daemon/app.cpp")).read()
    sigset = re.search(r"signals_\(io_,([^)]*)\)", app)
    need(sigset, "daemon/app.cpp: no signals_(io_, ...) set found")
    sig_text = " ".join(t for t, _ in sec.get("SIGNALS", []))
    for sig in re.findall(r"SIG[A-Z0-9]+", sigset.group(1) if sigset else ""):
        need(sig in sig_text, f"signal {sig} has no SIGNALS entry")

    for s in ("NAME", "SYNOPSIS", "DESCRIPTION", "FILES", "ENVIRONMENT"):
        need(s in sec, f"section {s} missing")
    warn = subprocess.run(["groff", "-man", "-ww", "-z", manpage],
                          capture_output=True, text=True)
    need(warn.returncode == 0 and not warn.stderr.strip(),
         f"groff warnings: {warn.stderr.strip()}")

    for e in errors:
        print("FAIL:", e)
    print(f"{len(commands)} commands, {len(help_opts)} options, "
          f"{len(defaults)} settings checked; {len(errors)} problems")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
