#!/usr/bin/env python3
"""What a newcomer meets first, against the real compactiond (issue 22).

  usability_test.py --binary PATH --repo DIR TEST

  topic_destroy   `topic destroy NAME --yes`: refuses without --yes, refuses
                  a role that does not own the tables, drops the topic
  config_errors   an unknown COMPACTIOND_* variable, flag or file key is
                  refused with a suggestion; every error is one plain line
  systemd_flag    the start line says systemd=true only with NOTIFY_SOCKET
  auth_refused    a wrong password: /readyz says so, the retries back off
                  (one log line per attempt, at least 1 s apart), never the
                  password in the log; fixing the password recovers

Needs the PG* variables of a throwaway cluster (superuser) started by
deploy/local/pg.sh, whose pg_hba.conf asks members of
compaction_test_password for a password.
"""

import os
import re
import socket
import sys
import time
from datetime import datetime

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (Daemon, check, drop_schema, insert_headless,  # noqa: E402
                     log, psql, register, run_cli, scalar, setup_schema,
                     wait_for)
from harness import parse_test_args, run_one, scratch_dir  # noqa: E402

ARGS = None


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("COMPACTIOND_") and k != "NOTIFY_SOCKET"}
    env.update(extra)
    return env


def one_plain_line(r, what):
    """A failed command's stderr: one line, 'compactiond: ...', no logfmt."""
    lines = r.stderr.strip().splitlines()
    check(len(lines) == 1 and lines[0].startswith("compactiond: ")
          and "level=" not in lines[0],
          f"{what}: want one 'compactiond: ...' line, got {r.stderr!r}")
    return lines[0]


def test_topic_destroy():
    schema = f"d_destroy_{os.getpid()}"
    prefix = f"x{os.getpid()}"
    login = f"{prefix}_appuser"
    env = clean_env()
    setup_schema(ARGS.binary, schema, env)
    common = ["--schema", schema]
    try:
        r = run_cli(ARGS.binary, ["--help"], env)
        check("topic destroy NAME --yes" in r.stdout, "--help lacks destroy")
        tid = register(ARGS.binary, schema, "doomed", "1h", env)
        insert_headless(schema, tid, 3, env=env)

        r = run_cli(ARGS.binary, ["topic", "destroy", "doomed", *common], env)
        check(r.returncode == 2, f"without --yes: exit {r.returncode}")
        check("--yes" in one_plain_line(r, "without --yes"), r.stderr)
        r = run_cli(ARGS.binary, ["topic", "list", "--yes", *common], env)
        check(r.returncode == 2 and "'--yes' is for 'topic destroy'"
              in r.stderr, f"--yes elsewhere: {r.returncode} {r.stderr}")

        # A role that may use the topic but does not own its tables.
        r = run_cli(ARGS.binary, ["schema", "install", "--roles",
                                  "--role-prefix", prefix, *common], env)
        check(r.returncode == 0, f"schema install --roles: {r.stderr}")
        psql(f"CREATE ROLE {login} LOGIN IN ROLE {prefix}_app", env)
        r = run_cli(ARGS.binary, ["topic", "destroy", "doomed", "--yes",
                                  *common], dict(env, PGUSER=login))
        check(r.returncode == 1, f"as the app role: exit {r.returncode} "
              f"{r.stderr}")
        check("owns the schema's tables" in one_plain_line(r, "app role"),
              r.stderr)
        check(scalar(f"SELECT to_regclass('\"{schema}\".message_{tid}') "
                     "IS NOT NULL", env) == "t", "the app role dropped it")

        r = run_cli(ARGS.binary, ["topic", "destroy", "doomed", "--yes",
                                  *common], env)
        check(r.returncode == 0 and "destroyed topic=doomed" in r.stdout,
              f"destroy: exit {r.returncode} {r.stdout}{r.stderr}")
        check(scalar(f"SELECT count(*) FROM \"{schema}\".topic", env) == "0",
              "topic row left")
        check(scalar(f"SELECT to_regclass('\"{schema}\".compaction_head_"
                     f"{tid}') IS NULL", env) == "t", "head table left")
        r = run_cli(ARGS.binary, ["topic", "destroy", "doomed", "--yes",
                                  *common], env)
        check(r.returncode == 1 and "TopicNotFound" in
              one_plain_line(r, "again"), f"again: {r.returncode} {r.stderr}")
        print("FIGURE topic_destroy ok")
    finally:
        drop_schema(schema, env)
        psql(f"DROP ROLE IF EXISTS {login}", env, check_rc=False)
        for k in ("monitor", "janitor", "app", "owner"):
            psql(f"DROP OWNED BY {prefix}_{k}", env, check_rc=False)
            psql(f"DROP ROLE IF EXISTS {prefix}_{k}", env, check_rc=False)


def test_config_errors():
    cases = [
        ("variable", ["--check-config"], {"COMPACTIOND_BACH_SIZE": "5"},
         ["unknown variable 'COMPACTIOND_BACH_SIZE'",
          "did you mean 'COMPACTIOND_BATCH_SIZE'?"]),
        ("flag", ["--check-config", "--max-batchs", "3"], {},
         ["--max-batchs", "did you mean '--max-batches'?"]),
        ("command", ["topic", "frob"], {}, ["unknown command 'topic frob'"]),
    ]
    workdir = scratch_dir("cd_cfg_")
    path = os.path.join(workdir, "c.conf")
    with open(path, "w") as f:
        f.write("pool-sise = 3\n")
    cases.append(("file key", ["--check-config", "--config", path], {},
                  ["unknown key 'pool-sise'", "did you mean 'pool-size'?"]))
    for what, args, extra, wants in cases:
        r = run_cli(ARGS.binary, args, clean_env(**extra))
        check(r.returncode == 2, f"{what}: exit {r.returncode}, want 2")
        line = one_plain_line(r, what)
        for want in wants:
            check(want in line, f"{what}: {want!r} not in {line!r}")
    # A runtime failure prints the same way (it was logfmt).
    r = run_cli(ARGS.binary, ["topic", "list", "--db",
                              "host=127.0.0.1 port=1 connect_timeout=2"],
                clean_env())
    check(r.returncode == 1, f"unreachable: exit {r.returncode}")
    check("ConnectionLost" in one_plain_line(r, "unreachable"), r.stderr)
    print(f"FIGURE config_errors cases={len(cases) + 1}")


def start_line(daemon):
    line = wait_for(lambda: next((x for x in daemon.log_lines()
                                  if "msg=starting" in x), None), 10,
                    "the start line")
    return re.search(r"systemd=(\w+)", line).group(1)


def test_systemd_flag():
    args = ["run", "--listen", "127.0.0.1:0", "--db",
            "host=127.0.0.1 port=1", "--schema", "nowhere"]
    d = Daemon(ARGS.binary, args, env=clean_env(), name="plain").start()
    try:
        check(start_line(d) == "false", "systemd=true without NOTIFY_SOCKET")
    finally:
        d.stop()
    workdir = scratch_dir("cd_sdf_")
    path = os.path.join(workdir, "notify.sock")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(path)
    try:
        d = Daemon(ARGS.binary, args, env=clean_env(NOTIFY_SOCKET=path),
                   name="notified").start()
        try:
            check(start_line(d) == "true", "systemd=false with NOTIFY_SOCKET")
        finally:
            d.stop()
    finally:
        sock.close()
    print("FIGURE systemd_flag ok")


def timestamps(lines):
    out = []
    for line in lines:
        m = re.match(r"ts=(\S+)", line)
        out.append(datetime.strptime(m.group(1), "%Y-%m-%dT%H:%M:%S.%fZ"))
    return out


def test_auth_refused():
    group = "compaction_test_password"
    check(scalar("SELECT count(*) FROM pg_hba_file_rules "
                 f"WHERE '+{group}' = ANY(user_name)") != "0",
          f"pg_hba.conf has no line for +{group}: start the cluster with "
          "deploy/local/pg.sh")
    psql(f"DO $$ BEGIN CREATE ROLE {group} NOLOGIN; "
         "EXCEPTION WHEN duplicate_object THEN NULL; END $$")
    role = f"auth_d_{os.getpid()}"
    schema = f"d_auth_{os.getpid()}"
    wrong = "wrong-pw-5d2b"
    psql(f"CREATE ROLE {role} LOGIN SUPERUSER PASSWORD 'right-pw-8e4c' "
         f"IN ROLE {group}")
    setup_schema(ARGS.binary, schema)
    daemon = None
    try:
        register(ARGS.binary, schema, "t", "1h")
        env = clean_env(PGUSER=role, PGPASSWORD=wrong,
                        PGPASSFILE="/nonexistent")
        # reconnect-min/max this short would retry 5-10 times a second.
        daemon = Daemon(ARGS.binary, ["run", "--schema", schema, "--listen",
                                      "127.0.0.1:0", "--reconnect-min",
                                      "100ms", "--reconnect-max", "200ms"],
                        env=env, name="auth").start()
        started = time.monotonic()
        want = f'not ready: database authentication failed for role "{role}"'
        wait_for(lambda: daemon.get("/readyz")[1].strip() == want, 10,
                 f"/readyz to say {want!r}")
        time.sleep(max(0.0, 5.0 - (time.monotonic() - started)))
        lines = [x for x in daemon.log_lines()
                 if "level=warn" in x or "level=error" in x]
        refused = [x for x in lines if "authentication failed" in x]
        check(refused and all("component=database" in x for x in refused),
              f"refusals: {refused}")
        check(len(lines) == len(refused), f"other warnings: {lines}")
        # Attempts at 0, 1, 3 s (then 7): three lines in five seconds.
        check(2 <= len(refused) <= 4, f"{len(refused)} lines in 5 s")
        ts = timestamps(refused)
        gaps = [(b - a).total_seconds() for a, b in zip(ts, ts[1:])]
        check(all(g >= 0.95 for g in gaps), f"gaps between attempts: {gaps}")
        check(all(b >= a * 1.8 for a, b in zip(gaps, gaps[1:])),
              f"backoff does not double: {gaps}")
        check(wrong not in daemon.log_text(), "the password is in the log")
        check(f'role={role}' in refused[0] or f'role="{role}"' in refused[0],
              f"the line does not name the role: {refused[0]}")
        log(f"refusals in 5 s: {len(refused)}, gaps {gaps}")

        # The operator fixes the password: the next attempt gets in.
        psql(f"ALTER ROLE {role} PASSWORD '{wrong}'")
        fixed = time.monotonic()
        daemon.wait_ready(timeout=20)
        print(f"FIGURE auth_refused lines_in_5s={len(refused)} "
              f"gaps={','.join(f'{g:.2f}' for g in gaps)} "
              f"ready_after_fix_s={time.monotonic() - fixed:.1f}")
    finally:
        if daemon:
            daemon.stop()
        drop_schema(schema)
        psql(f"DROP ROLE IF EXISTS {role}", check_rc=False)


TESTS = {
    "topic_destroy": test_topic_destroy,
    "config_errors": test_config_errors,
    "systemd_flag": test_systemd_flag,
    "auth_refused": test_auth_refused,
}


def main():
    global ARGS
    ARGS = parse_test_args(TESTS)
    return run_one(ARGS.test, TESTS[ARGS.test])


if __name__ == "__main__":
    sys.exit(main())
