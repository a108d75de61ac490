#!/usr/bin/env python3
"""The log cleaner through the real compactiond binary (doc/architecture.md).

  cleaner_test.py --binary PATH --repo ROOT TEST

  cleaner_bounds  a topic with retention 2s written to at a steady rate stays
                  bounded while `run` cleans it; a keep-forever topic keeps
                  everything; the metrics match the database.
  cleaner_cli     topic register --retention/--tombstone-retention (and bad
                  values), sweep --once cleaning, stats and topic list.

Needs the PG* variables of a throwaway cluster. Prints "FIGURE ..." lines.
"""

import json
import math
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (Daemon, check, drop_schema, log, parse_test_args,  # noqa: E402
                     psql, run_cli, run_one, scalar, setup_schema, wait_for)

ARGS = None
KEYS = 10


def schema_name(test):
    return f"d_{test}_{os.getpid()}"


def register(schema, name, *flags):
    r = run_cli(ARGS.binary, ["topic", "register", name, "--schema", schema,
                              *flags])
    check(r.returncode == 0, f"topic register {name}: {r.stderr}")
    return int(scalar(f"SELECT id FROM \"{schema}\".topic WHERE name = '{name}'"))


def writer(schema, tid, seconds, pause):
    """A psql session that produces, like the library, for `seconds`: keyed
    compacted values over KEYS keys, a tombstone every 7th keyed message (so
    the last keyed message of some key, one of the last 7, is a tombstone
    head that must expire), an unkeyed message every 5th. created_at is the clock at each insert (inside one DO
    block statement_timestamp() would stay at its start)."""
    m = f'"{schema}".message_{tid}'
    h = f'"{schema}".compaction_head_{tid}'
    sql = f"""
DO $$
DECLARE
  deadline timestamptz := clock_timestamp() + interval '{seconds} seconds';
  i int := 0;
  j int := 0;
  k text;
BEGIN
  WHILE clock_timestamp() < deadline LOOP
    i := i + 1;
    k := 'k' || (i % {KEYS});
    IF i % 5 = 0 THEN
      INSERT INTO {m} (message_key, schema_version, compaction_rank, payload,
                       created_at)
      VALUES (NULL, 1, NULL, '{{}}', clock_timestamp());
    ELSE
      j := j + 1;
      WITH n AS (
        INSERT INTO {m} (message_key, schema_version, compaction_rank,
                         payload, created_at)
        VALUES (k, 1, 0, CASE WHEN j % 7 = 0 THEN NULL
                              ELSE pg_catalog.jsonb_build_object('i', i) END,
                clock_timestamp())
        RETURNING id)
      INSERT INTO {h} AS h (message_key, head_id, schema_version,
                            compaction_rank, created_at, updated_at,
                            idle_since)
      SELECT k, n.id, 1, 0, clock_timestamp(), clock_timestamp(), NULL FROM n
      ON CONFLICT (message_key) DO UPDATE SET head_id = excluded.head_id,
        schema_version = excluded.schema_version,
        compaction_rank = excluded.compaction_rank,
        updated_at = excluded.updated_at, idle_since = NULL
      WHERE h.head_id IS NULL OR (excluded.schema_version,
        excluded.compaction_rank, excluded.head_id)
        > (h.schema_version, h.compaction_rank, h.head_id);
    END IF;
    COMMIT;
    PERFORM pg_catalog.pg_sleep({pause});
  END LOOP;
END
$$;
"""
    return subprocess.Popen(["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1",
                             "-c", sql], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)


def messages(schema, tid):
    return int(scalar(f'SELECT count(*) FROM "{schema}".message_{tid}'))


def heads(schema, tid):
    """Head rows that name a message (a tombstone head included)."""
    return int(scalar(f'SELECT count(*) FROM "{schema}".compaction_head_{tid} '
                      "WHERE head_id IS NOT NULL"))


def tombstones(schema, tid):
    return int(scalar(f'SELECT count(*) FROM "{schema}".message_{tid} '
                      "WHERE payload IS NULL"))


def dangling(schema, tid):
    return int(scalar(
        f'SELECT count(*) FROM "{schema}".compaction_head_{tid} h '
        "WHERE h.head_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM "
        f'"{schema}".message_{tid} m WHERE m.id = h.head_id)'))


def test_cleaner_bounds():
    schema = schema_name("clean")
    setup_schema(ARGS.binary, schema)
    daemon = None
    try:
        retention = 2.0
        tid = register(schema, "log", "--retention", "2s",
                       "--tombstone-retention", "2s")
        keep = register(schema, "keep", "--retention", "keep",
                        "--tombstone-retention", "keep")
        # Interval = clamp(min(retention, tombstone) / 2, 1s, 5s) = 1s.
        interval = 1.0
        daemon = Daemon(ARGS.binary, [
            "run", "--schema", schema, "--listen", "127.0.0.1:0",
            "--application-name", f"cd_clean_{os.getpid()}",
            "--cleaner-min-interval", "1s", "--cleaner-max-interval", "5s",
            "--stats-interval", "500ms", "--metrics-per-topic", "detail"],
            name="clean").start()
        daemon.wait_ready()
        check(daemon.metric("compaction_topic_retention_seconds",
                            topic="log") == 2.0, "retention gauge")
        check(math.isinf(daemon.metric("compaction_topic_retention_seconds",
                                       topic="keep")), "keep-forever gauge")
        seconds = 10
        w = writer(schema, tid, seconds, 0.01)
        wk = writer(schema, keep, 3, 0.05)
        started = time.monotonic()
        samples = []
        while w.poll() is None:
            time.sleep(1.0)
            samples.append((time.monotonic() - started, messages(schema, tid)))
            check(dangling(schema, tid) == 0, "a head names a deleted message")
        check(w.returncode == 0, f"writer failed: {w.stderr.read()}")
        wk.wait(timeout=30)
        elapsed = time.monotonic() - started
        produced = int(scalar(
            f'SELECT max(id) FROM "{schema}".message_{tid}'))
        rate = produced / elapsed
        # Each message goes within retention + one interval of its insert
        # (plus the pass's own time): twice the interval and a second of
        # scheduling noise on a loaded 2-core machine.
        bound = KEYS + rate * (retention + 2 * interval + 1.0)
        worst = max(n for t, n in samples if t >= retention + 2 * interval)
        log(f"samples (s, rows): {[(round(t, 1), n) for t, n in samples]}")
        print(f"FIGURE cleaner_bound rate_per_s={rate:.0f} "
              f"max_rows={worst} bound={bound:.0f} produced={produced}")
        check(worst <= bound, f"log grew to {worst} rows, bound {bound:.0f}")
        # Without a cleaner it would hold everything it was sent.
        check(worst < produced / 2, "the log was not cleaned")
        # After the writer stops, the log shrinks to the heads with a value:
        # superseded and unkeyed messages and expired tombstones go.
        # A tombstone head counts as a head until it expires, so the wait
        # is for both: a log of heads only, and no tombstone among them
        # (the last tombstone was written up to retention before then).
        wait_for(lambda: messages(schema, tid) == heads(schema, tid),
                 retention + 3 * interval + 5, "log down to its heads")
        wait_for(lambda: tombstones(schema, tid) == 0,
                 retention + 3 * interval + 5, "expired tombstones gone")
        check(messages(schema, tid) == heads(schema, tid),
              "log holds only its heads")
        check(dangling(schema, tid) == 0, "a head names a deleted message")
        kept = messages(schema, keep)
        check(kept == int(scalar(f'SELECT max(id) FROM "{schema}".message_{keep}')),
              "the keep-forever topic lost messages")

        # Metrics match the database.
        deleted = produced - messages(schema, tid)
        wait_for(lambda: daemon.metric(
            "compaction_cleaner_deleted_messages_total", topic="log") == deleted,
            10, f"cleaner deleted counter = {deleted}")
        check(daemon.metric("compaction_cleaner_deleted_messages_total",
                            topic="keep") == 0, "keep topic cleaned")
        check(daemon.metric("compaction_cleaner_runs_total", topic="log") > 3,
              "cleaner runs counted")
        check(daemon.metric("compaction_cleaner_run_failures_total",
                            topic="log") == 0, "cleaner failures")
        check(daemon.metric("compaction_cleaner_tombstones_expired_total",
                            topic="log") > 0, "no tombstone expired")
        check(daemon.metric("compaction_cleaner_last_success_timestamp_seconds",
                            topic="log") > 0, "no cleaner success stamped")
        psql(f'ANALYZE "{schema}".message_{tid}')
        wait_for(lambda: daemon.metric("compaction_log_messages", topic="log")
                 == messages(schema, tid), 5, "log size gauge = table")
        wait_for(lambda: daemon.metric("compaction_tombstoned_keys",
                                       topic="log") == 0, 5,
                 "tombstoned keys gauge")
        lag = daemon.metric("compaction_cleaner_lag_seconds", topic="log")
        check(lag is not None and lag < 5, f"cleaner lag {lag}")
    finally:
        if daemon:
            daemon.stop()
        drop_schema(schema)


def test_cleaner_cli():
    schema = schema_name("cleancli")
    setup_schema(ARGS.binary, schema)
    try:
        for bad in ["-1s", "x", "36501d"]:
            r = run_cli(ARGS.binary, ["topic", "register", "t", "--schema",
                                      schema, "--retention", bad])
            check(r.returncode == 2, f"--retention {bad}: rc {r.returncode}")
            check("retention" in r.stderr, f"--retention {bad}: {r.stderr}")
        r = run_cli(ARGS.binary, ["stats", "--retention", "1s",
                                  "--schema", schema])
        check(r.returncode == 2 and "is for 'topic register'" in r.stderr,
              f"--retention outside topic register: {r.stderr}")
        check(scalar(f'SELECT count(*) FROM "{schema}".topic') == "0",
              "a refused register wrote a topic")
        r = run_cli(ARGS.binary, ["topic", "register", "t", "--schema", schema,
                                  "--retention", "0", "--tombstone-retention",
                                  "keep"])
        check(r.returncode == 0, r.stderr)
        check("retention=0ms tombstone_retention=keep" in r.stdout
              or "retention=0s tombstone_retention=keep" in r.stdout, r.stdout)
        tid = int(scalar(f"SELECT id FROM \"{schema}\".topic WHERE name = 't'"))
        # Re-registering without the flags keeps them.
        r = run_cli(ARGS.binary, ["topic", "register", "t", "--schema", schema])
        check("tombstone_retention=keep" in r.stdout, r.stdout)
        psql(f"""INSERT INTO "{schema}".message_{tid}
                   (message_key, schema_version, payload)
                 SELECT NULL, 1, '{{}}' FROM generate_series(1, 25)""")
        r = run_cli(ARGS.binary, ["sweep", "--once", "--schema", schema])
        check(r.returncode == 0, r.stderr)
        check("topic=t cleaner deleted_messages=25 tombstones_expired=0"
              in r.stdout, r.stdout)
        check(messages(schema, tid) == 0, "sweep --once did not clean")
        r = run_cli(ARGS.binary, ["stats", "--json", "--schema", schema])
        check(r.returncode == 0, r.stderr)
        stats = json.loads(r.stdout)[0]
        check(stats["retention_seconds"] == 0, stats)
        check(stats["tombstone_retention_seconds"] is None, stats)
        check(stats["cleaner"]["total_deleted_rows"] == 25, stats)
        check(stats["cleaner"]["last_error"] == "", stats)
        r = run_cli(ARGS.binary, ["stats", "--schema", schema])
        check("CLEANER_LAG_S" in r.stdout, r.stdout)
        r = run_cli(ARGS.binary, ["topic", "list", "--json", "--schema", schema])
        check(json.loads(r.stdout)[0]["tombstone_retention_seconds"] is None,
              r.stdout)
    finally:
        drop_schema(schema)


TESTS = {"cleaner_bounds": test_cleaner_bounds,
         "cleaner_cli": test_cleaner_cli}


def main():
    global ARGS
    ARGS = parse_test_args(TESTS)
    return run_one(ARGS.test, TESTS[ARGS.test])


if __name__ == "__main__":
    sys.exit(main())
