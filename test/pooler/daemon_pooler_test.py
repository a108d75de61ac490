#!/usr/bin/env python3
"""compactiond through PgBouncer in transaction mode (ctest label pooler).

Run by test/pooler/with_pooler.sh, which starts the pooler in front of the
cluster of the PG* variables and names it in COMPACTION_POOLER_CONNINFO. The
PG* variables keep naming the cluster: psql, schema set-up and lock holders
bypass the pooler; the daemon goes through it with
prepared-statements = false.

Tests:
  run           sweeps and /metrics through the pooler; LISTEN found not to
                work there, logged once, topics polled (a topic registered
                later is swept); listen-notify = false never tries; directly
                the same build listens (the check does not misfire)
  stats_timeout a stats query that outlives stats-timeout is cancelled
                through the pooler (a session setting would be dropped)
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "daemon"))
from harness import (Daemon, check,  # noqa: E402
                     check_stats_cancelled, drop_schema, headless_count,
                     insert_headless, locked_topic, parse_test_args,
                     register, run_one, setup_schema, wait_for)

POOLER = os.environ.get("COMPACTION_POOLER_CONNINFO", "")
UNAVAILABLE = "LISTEN does not work on this connection"


def pooled(*args):
    return ["--db", POOLER, "--prepared-statements", "false", *args]


def schema_name(test):
    return f"p_{test}_{os.getpid()}"


def test_run():
    schema = schema_name("run")
    app = f"cd_pool_{os.getpid()}"
    setup_schema(ARGS.binary, schema)
    daemons = []
    try:
        first = register(ARGS.binary, schema, "first", "1s")
        insert_headless(schema, first, 50)
        common = ["run", "--schema", schema, "--listen", "127.0.0.1:0",
                  "--application-name", app, "--min-interval", "200ms",
                  "--topic-refresh-interval", "1s",
                  "--metrics-per-topic", "detail"]
        d = Daemon(ARGS.binary, pooled(*common), name="pooled").start()
        daemons.append(d)
        d.wait_ready()
        wait_for(lambda: headless_count(schema, first) == 0, 15,
                 "the first topic swept through the pooler")
        wait_for(lambda: d.metric("compaction_janitor_deleted_rows_total",
                                  topic="first") == 50, 10,
                 "deleted rows in /metrics")
        wait_for(lambda: UNAVAILABLE in d.log_text(), 10,
                 "the LISTEN fall-back logged")
        check(d.metric("compaction_topic_events_listening") == 0,
              "listening gauge is not 0 behind the pooler")

        # Registered while running: found by polling, then swept.
        later = register(ARGS.binary, schema, "later", "1s")
        insert_headless(schema, later, 20)
        wait_for(lambda: headless_count(schema, later) == 0, 15,
                 "a topic registered later swept through the pooler")
        check(d.log_text().count(UNAVAILABLE) == 1,
              "the fall-back is not logged exactly once")

        # listen-notify = false: no LISTEN attempt at all.
        off = Daemon(ARGS.binary,
                     pooled(*common, "--listen-notify", "false"),
                     name="no-listen").start()
        daemons.append(off)
        off.wait_ready()
        check("listen-notify = false" in off.log_text(), "no polling notice")
        check("component=listener msg=listening" not in off.log_text()
              and UNAVAILABLE not in off.log_text(), "LISTEN was tried")

        # Directly, with the defaults, the same check lets LISTEN work.
        direct = Daemon(ARGS.binary, common, name="direct").start()
        daemons.append(direct)
        wait_for(lambda: direct.metric("compaction_topic_events_listening")
                 == 1, 10, "listening gauge 1 on a direct connection")
        check(UNAVAILABLE not in direct.log_text(),
              "LISTEN refused on a direct connection")
    finally:
        for d in daemons:
            d.stop()
        drop_schema(schema)


def test_stats_timeout():
    schema = schema_name("stats")
    holder = locked_topic(ARGS.binary, schema)
    try:
        check_stats_cancelled(ARGS.binary,
                              pooled("--schema", schema, "--stats-timeout",
                                     "300ms"),
                              "pooler stats under a lock")
    finally:
        holder.kill()
        drop_schema(schema)


TESTS = {"run": test_run, "stats_timeout": test_stats_timeout}

if __name__ == "__main__":
    ARGS = parse_test_args(TESTS)
    if not POOLER:
        print("COMPACTION_POOLER_CONNINFO is not set "
              "(run through test/pooler/with_pooler.sh)")
        sys.exit(1)
    sys.exit(run_one(ARGS.test, TESTS[ARGS.test]))
