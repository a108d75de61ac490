#!/usr/bin/env python3
"""compactiond against a Citus coordinator (doc/citus.md), the real binary.

  daemon_test.py --binary PATH --repo ROOT run

  run  `compactiond run` on the coordinator of test/citus/with_cluster.sh
       sweeps the headless rows and cleans the log of a topic spread over
       4 shards on both workers, and /metrics shows it: the cleaner's and
       janitor's deletions, no failures, readable stats, and a consumer's
       lag on a second topic, counted on the shards.

Needs the PG* variables of the cluster (with_cluster.sh exports them).
"""

import os
import sys

sys.path.insert(
    0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                    "daemon"))
from harness import (Daemon, check, log, parse_test_args,  # noqa: E402
                     psql, run_cli, run_one, scalar, wait_for)

ARGS = None
KEYS = 40


def test_run():
    schema = f"d_citus_{os.getpid()}"
    r = run_cli(ARGS.binary, ["schema", "install", "--schema", schema])
    check(r.returncode == 0, f"schema install: {r.stderr}")
    check(scalar(f'SELECT profile FROM "{schema}".schema_version '
                 "WHERE topic_id IS NULL") == "citus", "not the citus profile")
    r = run_cli(ARGS.binary, ["topic", "register", "spread", "--schema",
                              schema, "--partitions", "4", "--headless-ttl",
                              "1ms", "--retention", "0",
                              "--tombstone-retention", "0"])
    check(r.returncode == 0, f"topic register: {r.stderr}")
    tid = scalar(f"SELECT id FROM \"{schema}\".topic WHERE name = 'spread'")
    m = f'"{schema}".message_{tid}'
    h = f'"{schema}".compaction_head_{tid}'
    # Three versions of 40 keys, the last of 8 keys a tombstone, and 20
    # headless rows, all through the topic's one-shard functions.
    psql(f"""
SELECT "{schema}".produce_{tid}('k' || g, 1, v,
         CASE WHEN v = 3 AND g < 8 THEN NULL
              ELSE pg_catalog.jsonb_build_object('value', v) END)
FROM generate_series(1, 3) v, generate_series(0, {KEYS - 1}) g
ORDER BY v, g;
SELECT "{schema}".lock_{tid}('idle-' || g, false)
FROM generate_series(1, 20) g;
""")
    check(int(scalar(f"SELECT count(*) FROM {m}")) == 3 * KEYS, "produce")
    workers = int(scalar(
        "SELECT count(DISTINCT nodeport) FROM pg_catalog.citus_shards "
        f"WHERE table_name = '{m}'::regclass"))
    check(workers == 2, f"shards on {workers} workers")
    # A consumer of a second topic (its positions on the coordinator, its
    # messages on the shards) that has read nothing of 12 keyed messages.
    r = run_cli(ARGS.binary, ["topic", "register", "read", "--schema",
                              schema, "--partitions", "4"])
    check(r.returncode == 0, f"topic register read: {r.stderr}")
    rid = scalar(f"SELECT id FROM \"{schema}\".topic WHERE name = 'read'")
    psql(f"""INSERT INTO "{schema}".consumer_position
             (topic_id, consumer, partition, done_snapshot)
             SELECT {rid}, 'late', p, pg_current_snapshot()
             FROM generate_series(0, 3) p""")
    psql(f"""SELECT "{schema}".produce_{rid}('r' || g, 1, 1, '{{}}'::jsonb)
             FROM generate_series(1, 12) g""")

    daemon = Daemon(ARGS.binary, [
        "run", "--schema", schema, "--listen", "127.0.0.1:0",
        "--application-name", f"cd_citus_{os.getpid()}",
        "--min-interval", "1s", "--max-interval", "2s",
        "--cleaner-min-interval", "1s", "--cleaner-max-interval", "2s",
        "--stats-interval", "500ms", "--metrics-per-topic", "detail"],
        name="citus").start()
    try:
        daemon.wait_ready()
        # The cleaner leaves the 32 heads (8 tombstones expire, their keys
        # turn headless); the janitor then removes all 28 headless rows.
        wait_for(lambda: int(scalar(f"SELECT count(*) FROM {m}")) == 32, 60,
                 "the cleaner to leave the 32 heads")
        wait_for(lambda: int(scalar(
            f"SELECT count(*) FROM {h} WHERE head_id IS NULL")) == 0, 60,
            "the janitor to sweep every headless row")
        check(int(scalar(f"SELECT count(*) FROM {h}")) == 32, "head rows")

        def swept():
            got = daemon.metrics()
            def value(name):
                return got.get((name, frozenset({("topic", "spread")})), 0)
            return (value("compaction_cleaner_deleted_messages_total") == 88
                    and value("compaction_cleaner_tombstones_expired_total")
                    == 8
                    and value("compaction_janitor_deleted_rows_total") == 28
                    and value("compaction_headless_rows") == 0
                    and got)
        got = wait_for(swept, 30, "/metrics to show the sweeps")
        for name in ("compaction_cleaner_run_failures_total",
                     "compaction_janitor_sweep_failures_total"):
            check(got.get((name, frozenset({("topic", "spread")})), 0) == 0,
                  f"{name} is not 0")
        check(got.get(("compaction_stats_unreadable_topics", frozenset()))
              == 0, "unreadable stats")
        check(got.get(("compaction_stats_refresh_failures_total",
                       frozenset())) == 0, "stats refresh failures")
        lag = wait_for(lambda: daemon.metric(
            "compaction_consumer_lag_messages", topic="read",
            consumer="late"), 15, "the consumer's lag in /metrics")
        check(lag == 12, f"consumer lag {lag}, want 12")
        check(daemon.metric("compaction_consumer_lag_unreadable",
                            topic="read") == 0, "consumer lag unreadable")
        log("FIGURE citus run: cleaner deleted 88, expired 8; janitor "
            "deleted 28; stats readable; consumer lag 12 from 4 shards")
        r = run_cli(ARGS.binary, ["stats", "--json", "--schema", schema])
        check(r.returncode == 0 and '"stats_error": ""' in r.stdout,
              f"stats: {r.stdout[-800:]} {r.stderr}")
    finally:
        daemon.stop()
        psql(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE', check_rc=False)


TESTS = {"run": test_run}


def main():
    global ARGS
    ARGS = parse_test_args(TESTS)
    return run_one(ARGS.test, TESTS[ARGS.test])


if __name__ == "__main__":
    sys.exit(main())
