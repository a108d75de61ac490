#!/usr/bin/env python3
"""Secrets and configuration bounds of the real compactiond binary.

  secrets_test.py --binary PATH --repo ROOT [CASE...]

A password or sslpassword never shows in stdout, stderr, logs or /metrics,
whichever way it reaches the daemon; it is refused on the command line; a
config-file line that does not parse is reported by number only; durations
beyond their bounds and schema names with braces are configuration errors
(exit 2). Needs the PG* variables of a throwaway cluster for the `run` case
only. Each case prints PASS or FAIL; exit 1 if any failed.
"""

import argparse
import os
import re
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (Daemon, TestFailure, check, drop_schema, log,  # noqa: E402
                     run_cli, setup_schema)

ARGS = None
# Distinctive, so that finding it anywhere is a leak and nothing else.
SECRET = f"Hunter2-{os.getpid()}-s3cr3t"
EXIT_USAGE = 2


def clean_env(**extra):
    """The environment without COMPACTIOND_* variables, plus `extra`."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("COMPACTIOND_")}
    env.update(extra)
    return env


def write_config(workdir, text, mode=0o600, name="compactiond.conf"):
    path = os.path.join(workdir, name)
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, mode)
    return path


def no_leak(r, what):
    out = r.stdout + r.stderr
    check(SECRET not in out, f"{what}: the secret appears in the output:\n{out}")


def case_print_config(workdir):
    """--print-config masks password and sslpassword from every source."""
    sources = {
        "config file": (["--config", write_config(
            workdir, f"db = host=h sslkey=/k sslpassword={SECRET} "
                     f"password={SECRET}\n")], clean_env()),
        "config file URI": (["--config", write_config(
            workdir, f"db = postgresql://u:{SECRET}@h/db?sslmode=verify-full"
                     f"&sslpassword={SECRET}\n", name="uri.conf")],
            clean_env()),
        "COMPACTIOND_DB": ([], clean_env(
            COMPACTIOND_DB=f"host=h sslpassword='{SECRET}'")),
        # libpq reads PGPASSWORD; it has no variable for sslpassword (none in
        # libpq 15), so a PGSSLPASSWORD is simply another variable here.
        "PGPASSWORD": ([], clean_env(PGPASSWORD=SECRET,
                                     PGSSLPASSWORD=SECRET)),
    }
    for what, (args, env) in sources.items():
        r = run_cli(ARGS.binary, args + ["--print-config"], env=env)
        check(r.returncode == 0, f"{what}: exit {r.returncode}: {r.stderr}")
        no_leak(r, what)
        if what != "PGPASSWORD":
            check("sslpassword='********'" in r.stdout,
                  f"{what}: sslpassword not shown masked:\n{r.stdout}")
        r = run_cli(ARGS.binary, args + ["--check-config"], env=env)
        check(r.returncode == 0, f"{what} --check-config: {r.returncode}")
        no_leak(r, what + " --check-config")


def case_argv_refused(workdir):
    """A conninfo with a secret on the command line is refused, unechoed."""
    for db in (f"sslpassword={SECRET}",
               f"host=h sslkey=/k sslpassword='{SECRET}'",
               f"postgresql://u@h/db?sslpassword={SECRET}",
               f"password={SECRET}",
               f"postgres://u:{SECRET}@h/db"):
        r = run_cli(ARGS.binary, ["--db", db, "--print-config"],
                    env=clean_env())
        check(r.returncode == EXIT_USAGE and "'db'" in r.stderr,
              f"--db {db!r}: exit {r.returncode}, stderr {r.stderr!r}")
        check("password" in r.stderr, f"--db: message does not say why: "
              f"{r.stderr!r}")
        no_leak(r, f"--db {db!r}")


def case_argv_typos(workdir):
    """A conninfo in a mistyped flag or where a command goes is not echoed."""
    uri = f"postgresql://u:{SECRET}@h/db"
    cases = [
        # Boost's own message quoted the whole word, value included.
        (["--dbb=host=x password=" + SECRET, "--check-config"],
         "unrecognised option '--dbb' (did you mean '--db'?)"),
        (["--DB=host=x password=" + SECRET], "unrecognised option '--DB'"),
        (["run", f"--conninfo={uri}"], "unrecognised option '--conninfo'"),
        ([f"--{uri}"], "an unrecognised option (not shown"),
        ([f"-p{SECRET}"], "unrecognised option '-p'"),
        # A conninfo given without --db is taken for a command.
        ([uri], "unknown command (not shown"),
        ([f"password={SECRET}", "host=h"], "unknown command (not shown"),
        # A password typed where the command goes, alone or after one.
        ([SECRET.split("-")[0]], "unknown command (not shown"),
        (["topic", SECRET], "unknown command (not shown"),
    ]
    for args, expected in cases:
        r = run_cli(ARGS.binary, args, env=clean_env())
        check(r.returncode == EXIT_USAGE,
              f"{args[0][:12]}...: exit {r.returncode}, stderr {r.stderr!r}")
        no_leak(r, f"argv {args[0][:12]}...")
        check(expected in r.stderr,
              f"{args[0][:12]}...: {expected!r} not in {r.stderr!r}")
    # Words that look like one are still quoted, as before.
    r = run_cli(ARGS.binary, ["topic", "frob"], env=clean_env())
    check("unknown command 'topic frob'" in r.stderr, r.stderr)


def case_config_parse_error(workdir):
    """A config-file line that does not parse is reported by number only."""
    # Boost.Program_options used to quote such a line whole.
    conf = write_config(workdir, f"db = password={SECRET} host=x\n"
                                 f"  password {SECRET}\n", name="bad.conf")
    r = run_cli(ARGS.binary, ["--config", conf, "--check-config"],
                env=clean_env())
    no_leak(r, "broken config line")
    check(r.returncode == EXIT_USAGE, f"exit {r.returncode}: {r.stderr}")
    check(conf in r.stderr and re.search(r"\bline 2\b", r.stderr),
          f"error does not name the file and line 2: {r.stderr!r}")
    # A line whose left side would be quoted as an unknown key.
    conf = write_config(workdir, f"postgresql://u:{SECRET}@h/db?sslmode=x\n",
                        name="bad2.conf")
    r = run_cli(ARGS.binary, ["--config", conf, "--check-config"],
                env=clean_env())
    check(r.returncode == EXIT_USAGE and "line 1" in r.stderr,
          f"unknown key line: {r.returncode} {r.stderr!r}")
    no_leak(r, "unknown key line")


def case_permission_warning(workdir):
    """A secret in a group/world-readable config file is warned about once."""
    conf = write_config(workdir, f"db = host=h sslpassword={SECRET}\n",
                        mode=0o644, name="open.conf")
    r = run_cli(ARGS.binary, ["--config", conf, "--check-config"],
                env=clean_env())
    check(r.returncode == 0, f"exit {r.returncode}: {r.stderr}")
    warnings = [line for line in r.stderr.splitlines()
                if "level=warn" in line and "readable by group or others" in line]
    check(len(warnings) == 1 and "mode=0644" in warnings[0] and conf in warnings[0],
          f"want one warning naming the file and mode 0644: {r.stderr!r}")
    no_leak(r, "permission warning")
    os.chmod(conf, 0o600)
    r = run_cli(ARGS.binary, ["--config", conf, "--check-config"],
                env=clean_env())
    check(r.returncode == 0 and "level=warn" not in r.stderr,
          f"0600 file: unexpected warning: {r.stderr!r}")


def case_bounds(workdir):
    """Durations beyond their bounds and braces in a schema: exit 2."""
    bad = [
        (["topic", "register", "x", "--headless-ttl", "1000000000d"],
         "headless-ttl", "36500d"),
        (["--claim-ttl", "1000000000d", "--check-config"], "claim-ttl",
         "36500d"),
        (["--max-interval", "3000000d", "--check-config"], "max-interval",
         "365d"),
        (["--stats-interval", "9999999999999999999d", "--check-config"],
         "stats-interval", "365d"),
        (["--shutdown-timeout", "400d", "--check-config"], "shutdown-timeout",
         "365d"),
        (["--statement-timeout", "2147483648ms", "--claim-ttl", "30d",
          "--check-config"], "statement-timeout", "2147483647ms"),
        (["--schema", "{id}", "--check-config"], "schema", "{"),
    ]
    for args, key, bound in bad:
        r = run_cli(ARGS.binary, args, env=clean_env())
        check(r.returncode == EXIT_USAGE and f"'{key}'" in r.stderr
              and bound in r.stderr,
              f"{args}: exit {r.returncode}, want 2 naming '{key}' and "
              f"{bound}: {r.stderr!r}")
    r = run_cli(ARGS.binary, ["--claim-ttl", "36500d", "--max-interval", "365d",
                              "--check-config"], env=clean_env())
    check(r.returncode == 0, f"values at the bounds refused: {r.stderr}")


def case_run(workdir):
    """A real run and a failed connection never log the secret."""
    schema = f"d_secrets_{os.getpid()}"
    app = f"cd_secrets_{os.getpid()}"
    setup_schema(ARGS.binary, schema)
    daemon = None
    try:
        # Over the Unix socket libpq never uses sslpassword; the daemon still
        # holds it in its conninfo for the whole run.
        conf = write_config(workdir, f"db = sslpassword={SECRET}\n",
                            name="run.conf")
        daemon = Daemon(ARGS.binary, [
            "run", "--config", conf, "--schema", schema, "--listen",
            "127.0.0.1:0", "--application-name", app],
            env=clean_env(), name="secrets", workdir=workdir).start()
        daemon.wait_ready()
        status, body = daemon.get("/metrics")
        check(status == 200 and SECRET not in body, "secret in /metrics")
        daemon.stop()
        check(SECRET not in daemon.log_text(), "secret in the daemon's log")
        # A connection that fails: libpq's message must not carry it either.
        conf = write_config(workdir, f"db = host=127.0.0.1 port=1 "
                                     f"password={SECRET} sslpassword={SECRET}"
                                     " connect_timeout=2\n", name="down.conf")
        r = run_cli(ARGS.binary, ["stats", "--config", conf], env=clean_env())
        check(r.returncode == 1, f"stats against port 1: exit {r.returncode}")
        no_leak(r, "failed connection")
    finally:
        if daemon:
            daemon.stop()
        drop_schema(schema)


CASES = {
    "print_config": case_print_config,
    "argv_refused": case_argv_refused,
    "argv_typos": case_argv_typos,
    "config_parse_error": case_config_parse_error,
    "permission_warning": case_permission_warning,
    "bounds": case_bounds,
    "run": case_run,
}


def main():
    global ARGS
    p = argparse.ArgumentParser()
    p.add_argument("--binary", required=True)
    p.add_argument("--repo", required=True)
    p.add_argument("cases", nargs="*", help=", ".join(CASES))
    ARGS = p.parse_args()
    unknown = [c for c in ARGS.cases if c not in CASES]
    if unknown:
        p.error(f"unknown case(s) {unknown}; choose from {list(CASES)}")
    failed = 0
    for name in ARGS.cases or list(CASES):
        workdir = tempfile.mkdtemp(prefix="cd_secrets_")
        try:
            CASES[name](workdir)
            print(f"PASS {name}", flush=True)
        except TestFailure as e:
            failed += 1
            print(f"FAIL {name}: {e}", flush=True)
            for d in Daemon.instances:
                print(f"--- log of {d.name} (last 40 lines)")
                print("\n".join(d.log_lines()[-40:]), flush=True)
            Daemon.instances.clear()
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
    print(f"{len(ARGS.cases or CASES) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    log("secrets_test")
    sys.exit(main())
