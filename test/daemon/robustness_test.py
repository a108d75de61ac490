#!/usr/bin/env python3
"""The real compactiond against hostile or broken database state.

  robustness_test.py --binary PATH --repo ROOT TEST

search_path_traps: another role planted look-alikes of the built-in
functions and operators (test/support/traps.sql) in a schema the database's
search_path puts before pg_catalog and in public; no trap may run in any of
the daemon's sessions (doc/security.md).
broken_topic: a topic whose tables were dropped or altered by hand never
takes the other topics' statistics down; it is counted and logged.
hostile_output: text another role planted (a janitor's last_error with
terminal escapes and a newline) prints escaped in the CLI's tables: no
raw control character, no forged row; JSON output carries it intact.
"""

import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (Daemon, check, drop_schema,  # noqa: E402
                     headless_count, insert_headless, log, psql, register,
                     run_cli, scalar, setup_schema, wait_for)
from harness import parse_test_args, run_one  # noqa: E402

ARGS = None


def run_args(schema, app, *extra):
    return ["run", "--schema", schema, "--listen", "127.0.0.1:0",
            "--application-name", app, "--min-interval", "1s",
            "--stats-interval", "500ms", *extra]


# --- trap functions on the search path ----------------------------------------

def trap_hits(env):
    return int(scalar("SELECT CASE WHEN is_called THEN last_value ELSE 0 END"
                      " FROM public.trap_hits", env))


def test_search_path_traps():
    db = f"traps_{os.getpid()}"
    schema = "compaction"
    app = f"cd_traps_{os.getpid()}"
    psql(f"CREATE DATABASE {db}")
    daemon = None
    # The daemon and its CLI see the trapped database as any session would;
    # the test's own psql pins search_path, so its setup SQL is not trapped.
    env = dict(os.environ, PGDATABASE=db)
    setup_env = dict(env, PGOPTIONS="-c search_path=pg_catalog")
    try:
        with open(os.path.join(ARGS.repo, "test/support/traps.sql")) as f:
            traps = f.read()
        psql(traps, setup_env)
        # Armed: an ordinary session calls the planted now().
        psql("SELECT now()", env, check_rc=False)
        armed = trap_hits(setup_env)
        check(armed == 1, f"the traps are not armed (hits {armed})")

        for args in (["schema", "install"],
                     ["topic", "register", "trapped", "--headless-ttl", "1s"],
                     ["topic", "register", "other", "--headless-ttl", "1h"]):
            r = run_cli(ARGS.binary, args + ["--schema", schema], env)
            check(r.returncode == 0, f"{args} failed: {r.stderr}")
        tid = int(scalar(f"SELECT id FROM {schema}.topic WHERE name = "
                         "'trapped'", setup_env))
        insert_headless(schema, tid, 30, env=setup_env)
        for args in (["sweep", "--once"], ["stats"], ["stats", "--json"],
                     ["topic", "list"], ["topic", "list", "--json"]):
            r = run_cli(ARGS.binary, args + ["--schema", schema], env)
            check(r.returncode == 0, f"{args} failed: {r.stderr}")
        check(headless_count(schema, tid, setup_env) == 0,
              "sweep --once left expired rows")

        insert_headless(schema, tid, 30, env=setup_env, prefix="again")
        daemon = Daemon(ARGS.binary, run_args(schema, app), env=env,
                        name="traps").start()
        daemon.wait_ready()
        wait_for(lambda: headless_count(schema, tid, setup_env) == 0, 20,
                 "the running daemon to sweep")
        # A registration seen through LISTEN, then a stats refresh of it.
        r = run_cli(ARGS.binary, ["topic", "register", "late", "--schema",
                                  schema], env)
        check(r.returncode == 0, f"late register failed: {r.stderr}")
        wait_for(lambda: daemon.metric("compaction_headless_rows",
                                       topic="late") is not None, 20,
                 "the late topic's series")
        daemon.stop()
        hits = trap_hits(setup_env)
        check(hits == armed, f"{hits - armed} trap calls in the daemon's "
              "sessions:\n" + daemon.log_text()[-3000:])
        log(f"FIGURE search_path traps: 0 calls (armed check: {armed})")
    finally:
        if daemon:
            daemon.stop()
        psql(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)", check_rc=False)


# --- a broken topic -----------------------------------------------------------

def test_broken_topic():
    schema = f"d_broken_{os.getpid()}"
    app = f"cd_broken_{os.getpid()}"
    setup_schema(ARGS.binary, schema)
    daemon = None
    try:
        ids = {n: register(ARGS.binary, schema, n, "1h")
               for n in ("healthy", "dropped", "altered")}
        for n, tid in ids.items():
            insert_headless(schema, tid, 5, age_sql="interval '1 minute'")
        daemon = Daemon(ARGS.binary, run_args(schema, app),
                        name="broken").start()
        daemon.wait_ready()
        wait_for(lambda: daemon.metric("compaction_headless_rows",
                                       topic="healthy") == 5, 15,
                 "the first stats")
        check(daemon.metric("compaction_stats_unreadable_topics") == 0,
              "unreadable topics before any breakage")

        psql(f'DROP TABLE "{schema}".compaction_head_{ids["dropped"]}')
        psql(f'ALTER TABLE "{schema}".compaction_head_{ids["altered"]} '
             "DROP COLUMN idle_since")
        psql(f"""INSERT INTO "{schema}".topic (name) VALUES ('typed-in')""")
        insert_headless(schema, ids["healthy"], 7, prefix="more",
                        age_sql="interval '1 minute'")
        wait_for(lambda: daemon.metric("compaction_headless_rows",
                                       topic="healthy") == 12, 15,
                 "the healthy topic's stats to keep updating")
        wait_for(lambda: daemon.metric(
            "compaction_stats_unreadable_topics") == 3, 15,
            "three unreadable topics counted")
        failures = daemon.metric("compaction_stats_refresh_failures_total")
        check(failures == 0, f"{failures} whole-refresh failures")
        lines = [line for line in daemon.log_lines()
                 if "msg=\"topic statistics unreadable\"" in line]
        named = {n for n in ("dropped", "altered", "typed-in")
                 if any(f"topic={n} " in line for line in lines)}
        check(named == {"dropped", "altered", "typed-in"},
              f"unreadable topics logged: {named}")
        # Logged once each, not at every refresh.
        time.sleep(1.5)
        again = [line for line in daemon.log_lines()
                 if "msg=\"topic statistics unreadable\"" in line]
        check(len(again) == 3, f"{len(again)} unreadable-topic log lines")

        # The CLI says which topic and why, and lists the others.
        r = run_cli(ARGS.binary, ["stats", "--schema", schema])
        check(r.returncode == 0, f"stats failed: {r.stderr}")
        check("stats unreadable" in r.stdout and "healthy" in r.stdout,
              f"stats output: {r.stdout}")
        r = run_cli(ARGS.binary, ["stats", "--json", "--schema", schema])
        check(r.returncode == 0, f"stats --json failed: {r.stderr}")
        by_topic = {t["topic"]: t for t in json.loads(r.stdout)}
        check(by_topic["healthy"]["stats_error"] == "" and
              "does not exist" in by_topic["dropped"]["stats_error"],
              f"stats --json: {by_topic}")

        # Repaired (the typed-in row removed): counted down, logged.
        psql(f"""DELETE FROM "{schema}".topic WHERE name = 'typed-in'""")
        wait_for(lambda: daemon.metric(
            "compaction_stats_unreadable_topics") == 2, 15,
            "the count to follow a repair")
    finally:
        if daemon:
            daemon.stop()
        drop_schema(schema)


# --- the shipped roles through the CLI -----------------------------------------

def test_roles_cli():
    schema = f"d_roles_{os.getpid()}"
    prefix = f"r{os.getpid()}"
    login = f"{prefix}_sweeper"
    setup_schema(ARGS.binary, schema)
    try:
        r = run_cli(ARGS.binary, ["schema", "install", "--roles",
                                  "--role-prefix", prefix, "--schema", schema])
        check(r.returncode == 0, f"schema install --roles failed: {r.stderr}")
        check(f"{prefix}_janitor" in r.stdout, f"output: {r.stdout}")
        roles = {row[0] for row in psql(
            f"SELECT rolname FROM pg_roles WHERE rolname LIKE '{prefix}\\_%'")}
        check(roles == {f"{prefix}_{k}" for k in
                        ("owner", "app", "janitor", "monitor")},
              f"roles: {roles}")
        tid = register(ARGS.binary, schema, "swept", "1h")
        insert_headless(schema, tid, 4, age_sql="interval '2 hours'")
        # compactiond as a login member of the janitor role: sweeps, and
        # cannot drop what it sweeps.
        psql(f"CREATE ROLE {login} LOGIN IN ROLE {prefix}_janitor")
        env = dict(os.environ, PGUSER=login)
        r = run_cli(ARGS.binary, ["sweep", "--once", "--schema", schema], env)
        check(r.returncode == 0, f"sweep as the janitor failed: {r.stderr}")
        check(headless_count(schema, tid) == 0, "the janitor did not sweep")
        r = run_cli(ARGS.binary, ["stats", "--schema", schema], env)
        check(r.returncode == 0, f"stats as the janitor failed: {r.stderr}")
        denied = psql(f'DROP TABLE "{schema}".compaction_head_{tid}', env,
                      check_rc=False)
        check(headless_count(schema, tid) == 0 and denied == [],
              "the janitor dropped a head table")
        check(psql(f"SELECT to_regclass('\"{schema}\".compaction_head_{tid}')"
                   " IS NOT NULL")[0][0] == "t", "head table gone")
        # Issue 23 row 1: an app login cannot change a topic's retention
        # through the CLI; it registers it unchanged; an owner login can.
        psql(f"CREATE ROLE {prefix}_svc LOGIN IN ROLE {prefix}_app")
        psql(f"CREATE ROLE {prefix}_admin LOGIN IN ROLE {prefix}_owner")
        retention = (f'SELECT retention_ms FROM "{schema}".topic '
                     "WHERE name = 'swept'")
        before = psql(retention)[0][0]
        app_env = dict(os.environ, PGUSER=f"{prefix}_svc")
        r = run_cli(ARGS.binary, ["topic", "register", "swept", "--retention",
                                  "0s", "--tombstone-retention", "0s",
                                  "--schema", schema], app_env)
        check(r.returncode == 1 and "needs the owner role" in r.stderr,
              f"app login changed the retention: {r.returncode} {r.stderr}")
        check(psql(retention)[0][0] == before, "retention changed")
        r = run_cli(ARGS.binary, ["topic", "register", "swept", "--schema",
                                  schema], app_env)
        check(r.returncode == 0, f"app login re-register failed: {r.stderr}")
        r = run_cli(ARGS.binary, ["topic", "register", "swept", "--retention",
                                  "0s", "--schema", schema],
                    dict(os.environ, PGUSER=f"{prefix}_admin"))
        check(r.returncode == 0, f"owner login failed: {r.stderr}")
        check(psql(retention)[0][0] == "0", "the owner's retention not set")
        r = run_cli(ARGS.binary, ["schema", "install", "--role-prefix", "x",
                                  "--schema", schema])
        check(r.returncode == 2, "--role-prefix without --roles accepted")
    finally:
        drop_schema(schema)
        psql(f"DROP ROLE IF EXISTS {login}", check_rc=False)
        psql(f"DROP ROLE IF EXISTS {prefix}_svc", check_rc=False)
        psql(f"DROP ROLE IF EXISTS {prefix}_admin", check_rc=False)
        for k in ("monitor", "janitor", "app", "owner"):
            psql(f"DROP OWNED BY {prefix}_{k}", check_rc=False)
            psql(f"DROP ROLE IF EXISTS {prefix}_{k}", check_rc=False)


# --- terminal escapes in planted text -------------------------------------------

def test_hostile_output():
    schema = f"d_out_{os.getpid()}"
    setup_schema(ARGS.binary, schema)
    common = ["--schema", schema]
    planted = ("\x1b[2J\x1b[31mFAKE ALERT\x1b[0m\r\nother 1h 0 0.0 0"
               "\x07\x7f\u009b31m\ttab")
    try:
        victim = register(ARGS.binary, schema, "victim", "1h")
        register(ARGS.binary, schema, "bystander", "1h")
        # As the owner (or a janitor login) could: E'' escapes, no psql quoting.
        psql(f"""INSERT INTO "{schema}".janitor_state (topic_id, last_error)
                 VALUES ({victim}, E'\\x1b[2J\\x1b[31mFAKE ALERT\\x1b[0m'
                         || E'\\r\\nother 1h 0 0.0 0\\x07\\x7f'
                         || E'\\u009b31m\\ttab')
                 ON CONFLICT (topic_id) DO UPDATE
                 SET last_error = excluded.last_error""")
        r = run_cli(ARGS.binary, ["stats", *common])
        check(r.returncode == 0, r.stderr)
        out = r.stdout
        for bad in ("\x1b", "\r", "\x07", "\x7f", "\u009b", "\t"):
            check(bad not in out, f"raw {bad!r} in the table:\n{out!r}")
        lines = out.split("\n")
        check(lines[-1] == "" and len(lines) == 4,
              f"want a header and two rows:\n{out!r}")
        check(not any(line.startswith("other") for line in lines),
              f"forged row:\n{out!r}")
        victim_line = [line for line in lines if line.startswith("victim")]
        check(len(victim_line) == 1
              and "\\x1b[2J\\x1b[31mFAKE ALERT" in victim_line[0]
              and "\\r\\nother 1h" in victim_line[0]
              and "\\xc2\\x9b31m\\ttab" in victim_line[0],
              f"escaped error not shown: {victim_line!r}")
        r = run_cli(ARGS.binary, ["stats", "--json", *common])
        stats = {t["topic"]: t for t in json.loads(r.stdout)}
        check(stats["victim"]["janitor"]["last_error"] == planted,
              f"JSON changed the text: {stats['victim']['janitor']!r}")
        r = run_cli(ARGS.binary, ["topic", "list", *common])
        check(r.returncode == 0 and len(r.stdout.split("\n")) == 4,
              r.stdout + r.stderr)
    finally:
        drop_schema(schema)


TESTS = {
    "search_path_traps": test_search_path_traps,
    "broken_topic": test_broken_topic,
    "roles_cli": test_roles_cli,
    "hostile_output": test_hostile_output,
}


def main():
    global ARGS
    ARGS = parse_test_args(TESTS)
    return run_one(ARGS.test, TESTS[ARGS.test])


if __name__ == "__main__":
    sys.exit(main())
