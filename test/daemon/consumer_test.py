#!/usr/bin/env python3
"""Consumers through the real compactiond binary (doc/operations.md).

  consumer_test.py --binary PATH --repo ROOT TEST

  consumer_metrics  compaction_consumer_* of an up-to-date, a lagging and an
                    inactive consumer match what was produced and consumed
                    (the lagging one holds tombstones back, the inactive
                    one no longer does);
                    compactiond runs as a login member of the janitor role,
                    which reads no message table.
  consumer_lag_fails  a consumer lag query that fails (its function
                    missing) leaves the rest of the statistics refresh
                    standing: headless and log figures published, no
                    refresh failure counted, one warning, and
                    compaction_consumer_lag_unreadable 1; the consumer
                    series come back when it reads again, follow the log
                    while the topic's own figures are unreadable, and go
                    (not left at their last values) when it fails once more.
  consumer_cli      consumer list [--json], consumer reset --to-start and
                    --to-end, consumer drop (refused to the app role, with
                    the owner named) and their usage errors.

Positions are written with psql as a Poll leaves them: done_snapshot is the
snapshot the consumer has consumed everything visible in.

Needs the PG* variables of a throwaway cluster.
"""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (Daemon, check, drop_schema, log, parse_test_args,  # noqa: E402
                     psql, run_cli, run_one, scalar, setup_schema, wait_for)

ARGS = None


def produce(schema, tid, n, age="0"):
    psql(f"""INSERT INTO "{schema}".message_{tid}
             (message_key, schema_version, compaction_rank, payload)
             SELECT NULL, 1, NULL, '{{}}'::jsonb FROM generate_series(1, {n})""")
    if age != "0":
        # created_at is the server's; age the rows as time would.
        psql(f"""ALTER TABLE "{schema}".message_{tid} DISABLE TRIGGER USER;
                 UPDATE "{schema}".message_{tid} SET created_at =
                   created_at - interval '{age}'
                 WHERE created_at > now() - interval '1 minute';
                 ALTER TABLE "{schema}".message_{tid} ENABLE TRIGGER USER""")


def position(schema, tid, consumer, last_poll="now()"):
    """Every partition of `consumer` has consumed what is committed now."""
    psql(f"""INSERT INTO "{schema}".consumer_position
             (topic_id, consumer, partition, done_snapshot, last_poll_at)
             SELECT {tid}, '{consumer}', p, pg_current_snapshot(), {last_poll}
             FROM generate_series(0, (SELECT partitions - 1 FROM
               "{schema}".topic WHERE id = {tid})) p""")


def test_consumer_metrics():
    schema = f"d_consumer_{os.getpid()}"
    prefix = f"c{os.getpid()}"
    login = f"{prefix}_daemon"
    setup_schema(ARGS.binary, schema)
    daemon = None
    try:
        r = run_cli(ARGS.binary, ["schema", "install", "--roles",
                                  "--role-prefix", prefix, "--schema", schema])
        check(r.returncode == 0, f"schema install --roles: {r.stderr}")
        r = run_cli(ARGS.binary, ["topic", "register", "t", "--schema", schema])
        check(r.returncode == 0, f"topic register: {r.stderr}")
        tid = int(scalar(f"SELECT id FROM \"{schema}\".topic WHERE name = 't'"))
        # Tombstones are kept 5 minutes: "late" (10 minutes behind) holds
        # them back, "idle" (inactive) no longer does.
        psql(f"""UPDATE "{schema}".topic SET tombstone_retention_ms = 300000
                 WHERE id = {tid}""")
        # "idle" consumed nothing and last polled 8 days ago (the default
        # consumer_inactive_after is 7 days).
        position(schema, tid, "idle", "now() - interval '8 days'")
        produce(schema, tid, 3, age="2 hours")
        position(schema, tid, "done")
        position(schema, tid, "late")
        produce(schema, tid, 5, age="10 minutes")
        # "done" has consumed the 5 as well.
        psql(f"""UPDATE "{schema}".consumer_position
                 SET done_snapshot = pg_current_snapshot()
                 WHERE consumer = 'done'""")
        psql(f"CREATE ROLE {login} LOGIN IN ROLE {prefix}_janitor")
        env = dict(os.environ, PGUSER=login)
        daemon = Daemon(ARGS.binary, [
            "run", "--schema", schema, "--listen", "127.0.0.1:0",
            "--application-name", f"cd_consumer_{os.getpid()}",
            "--stats-interval", "500ms"], env=env, name="consumer").start()
        daemon.wait_ready()

        def m(name, consumer):
            return daemon.metric(name, topic="t", consumer=consumer)

        wait_for(lambda: m("compaction_consumer_lag_messages", "late")
                 is not None, 15, "consumer metrics")
        want = {"done": (0, 0, 0, 0), "late": (5, 600, 0, 1),
                "idle": (8, 7200, 1, 0)}
        for c, (lag, age, inactive, holding) in want.items():
            got = m("compaction_consumer_lag_messages", c)
            check(got == lag, f"{c}: lag_messages {got}, want {lag}")
            secs = m("compaction_consumer_lag_seconds", c)
            check(age <= secs < age + 60, f"{c}: lag_seconds {secs}, want ~{age}")
            got = m("compaction_consumer_inactive", c)
            check(got == inactive, f"{c}: inactive {got}, want {inactive}")
            got = m("compaction_consumer_holding_back", c)
            check(got == holding, f"{c}: holding_back {got}, want {holding}")
        now = float(scalar("SELECT extract(epoch FROM now())"))
        last = m("compaction_consumer_last_poll_timestamp_seconds", "idle")
        check(abs(now - 8 * 86400 - last) < 60, f"idle last poll {last}")
        last = m("compaction_consumer_last_poll_timestamp_seconds", "done")
        check(abs(now - last) < 60, f"done last poll {last}")
        # A dropped consumer's series go.
        psql(f"DELETE FROM \"{schema}\".consumer_position WHERE consumer = 'late'")
        wait_for(lambda: m("compaction_consumer_lag_messages", "late") is None,
                 15, "the dropped consumer's series to go")
        log("consumer metrics match")
    finally:
        if daemon is not None:
            daemon.stop()
        drop_schema(schema)
        for role in (login, "app", "janitor", "monitor", "owner"):
            name = role if role == login else f"{prefix}_{role}"
            psql(f"DROP ROLE IF EXISTS {name}", check_rc=False)


def lag(schema, consumer):
    r = run_cli(ARGS.binary, ["consumer", "list", "--json", "--schema", schema])
    check(r.returncode == 0, f"consumer list --json: {r.stderr}")
    rows = {c["consumer"]: c for c in json.loads(r.stdout)}
    return rows[consumer]["lag_messages"] if consumer in rows else None


def test_consumer_cli():
    schema = f"d_consumer_cli_{os.getpid()}"
    prefix = f"cc{os.getpid()}"
    login = f"{prefix}_user"
    setup_schema(ARGS.binary, schema)
    try:
        r = run_cli(ARGS.binary, ["schema", "install", "--roles",
                                  "--role-prefix", prefix, "--schema", schema])
        check(r.returncode == 0, f"schema install --roles: {r.stderr}")
        r = run_cli(ARGS.binary, ["topic", "register", "t", "--schema", schema])
        check(r.returncode == 0, f"topic register: {r.stderr}")
        tid = int(scalar(f"SELECT id FROM \"{schema}\".topic WHERE name = 't'"))
        produce(schema, tid, 4)
        position(schema, tid, "reader")
        produce(schema, tid, 2)
        parts = int(scalar(f"SELECT partitions FROM \"{schema}\".topic"))
        check(lag(schema, "reader") == 2, "lag before reset")
        r = run_cli(ARGS.binary, ["consumer", "list", "--schema", schema])
        check(r.returncode == 0, f"consumer list: {r.stderr}")
        row = [line.split() for line in r.stdout.splitlines()
               if line.startswith("t ")]
        check(row and row[0][:4] == ["t", "reader", str(parts), "2"],
              f"consumer list table: {r.stdout}")
        r = run_cli(ARGS.binary, ["consumer", "reset", "t", "reader",
                                  "--to-start", "--schema", schema])
        check(r.returncode == 0, f"reset --to-start: {r.stderr}")
        check(lag(schema, "reader") == 6, "lag after reset --to-start")
        r = run_cli(ARGS.binary, ["consumer", "reset", "t", "reader",
                                  "--to-end", "--schema", schema])
        check(r.returncode == 0, f"reset --to-end: {r.stderr}")
        check(lag(schema, "reader") == 0, "lag after reset --to-end")
        for args in (["consumer", "reset", "t", "reader"],
                     ["consumer", "reset", "t", "reader", "--to-start",
                      "--to-end"],
                     ["consumer", "drop", "t"],
                     ["topic", "list", "--to-end"]):
            r = run_cli(ARGS.binary, args + ["--schema", schema])
            check(r.returncode == 2, f"{args}: exit {r.returncode} {r.stderr}")
        r = run_cli(ARGS.binary, ["consumer", "reset", "t", "nobody",
                                  "--to-end", "--schema", schema])
        check(r.returncode == 1 and "no consumer 'nobody'" in r.stderr,
              f"reset of a missing consumer: {r.returncode} {r.stderr}")
        psql(f"CREATE ROLE {login} LOGIN IN ROLE {prefix}_app")
        env = dict(os.environ, PGUSER=login)
        r = run_cli(ARGS.binary, ["consumer", "drop", "t", "reader",
                                  "--schema", schema], env)
        check(r.returncode == 1 and "_owner" in r.stderr,
              f"drop as the app role: {r.returncode} {r.stderr}")
        check(lag(schema, "reader") == 0, "the app role dropped the consumer")
        r = run_cli(ARGS.binary, ["consumer", "drop", "t", "reader",
                                  "--schema", schema])
        check(r.returncode == 0 and f"partitions={parts}" in r.stdout,
              f"drop: {r.returncode} {r.stdout} {r.stderr}")
        check(lag(schema, "reader") is None, "the consumer is still listed")
    finally:
        drop_schema(schema)
        for role in (login, "app", "janitor", "monitor", "owner"):
            name = role if role == login else f"{prefix}_{role}"
            psql(f"DROP ROLE IF EXISTS {name}", check_rc=False)


def test_consumer_lag_fails():
    schema = f"d_consumer_lag_{os.getpid()}"
    setup_schema(ARGS.binary, schema)
    daemon = None
    fn = f'"{schema}".consumer_lag'
    try:
        r = run_cli(ARGS.binary, ["topic", "register", "t", "--schema", schema])
        check(r.returncode == 0, f"topic register: {r.stderr}")
        tid = int(scalar(f"SELECT id FROM \"{schema}\".topic WHERE name = 't'"))
        position(schema, tid, "c")
        produce(schema, tid, 4)
        psql(f"ALTER FUNCTION {fn}(bigint) RENAME TO consumer_lag_gone")
        daemon = Daemon(ARGS.binary, [
            "run", "--schema", schema, "--listen", "127.0.0.1:0",
            "--application-name", f"cd_consumer_lag_{os.getpid()}",
            "--stats-interval", "500ms"], name="consumer").start()
        daemon.wait_ready()
        wait_for(lambda: (daemon.metric(
            "compaction_stats_last_refresh_timestamp_seconds") or 0) > 0,
            15, "a statistics refresh to succeed without the consumers")
        check(daemon.metric("compaction_stats_refresh_failures_total") == 0,
              "the refresh counted as failed")
        check(daemon.metric("compaction_consumer_lag_messages", topic="t",
                            consumer="c") is None, "a consumer series "
              "appeared without a lag read")
        # Waited for: the first refresh may run before the topics are
        # loaded, and marks only the topics it knows.
        wait_for(lambda: daemon.metric("compaction_consumer_lag_unreadable",
                                       topic="t") == 1, 10,
                 "the lag marked unreadable")
        wait_for(lambda: "consumer lag unreadable" in daemon.log_text(), 10,
                 "the warning")
        psql(f'ALTER FUNCTION "{schema}".consumer_lag_gone(bigint) '
             "RENAME TO consumer_lag")
        wait_for(lambda: daemon.metric("compaction_consumer_lag_messages",
                                       topic="t", consumer="c") == 4,
                 15, "the consumer series once the lag reads again")
        check(daemon.metric("compaction_consumer_lag_unreadable",
                            topic="t") == 0, "still marked unreadable")
        check("consumer lag readable again" in daemon.log_text(),
              "no recovery line")
        check(daemon.log_text().count("consumer lag unreadable") == 1,
              "warned more than once")
        # The topic's own figures unreadable (its head table altered by
        # hand): its consumers' lag, read apart, still follows the log.
        psql(f'ALTER TABLE "{schema}".compaction_head_{tid} '
             "DROP COLUMN idle_since")
        wait_for(lambda: daemon.metric("compaction_stats_unreadable_topics")
                 == 1, 15, "the topic's statistics unreadable")
        produce(schema, tid, 2)
        wait_for(lambda: daemon.metric("compaction_consumer_lag_messages",
                                       topic="t", consumer="c") == 6,
                 15, "the lag to follow the log (not left at 4)")
        # Broken again after a good read: a lag of 4 left standing would
        # read as a healthy consumer while nothing is known.
        psql(f"ALTER FUNCTION {fn}(bigint) RENAME TO consumer_lag_gone")
        wait_for(lambda: daemon.metric("compaction_consumer_lag_unreadable",
                                       topic="t") == 1,
                 15, "the lag marked unreadable again")
        for name in ("lag_messages", "lag_seconds", "inactive",
                     "holding_back", "last_poll_timestamp_seconds"):
            check(daemon.metric(f"compaction_consumer_{name}", topic="t",
                                consumer="c") is None,
                  f"compaction_consumer_{name} left at its last value")
    finally:
        if daemon is not None:
            daemon.stop()
        drop_schema(schema)


TESTS = {"consumer_metrics": test_consumer_metrics,
         "consumer_lag_fails": test_consumer_lag_fails,
         "consumer_cli": test_consumer_cli}


def main():
    global ARGS
    ARGS = parse_test_args(TESTS)
    return run_one(ARGS.test, TESTS[ARGS.test])


if __name__ == "__main__":
    sys.exit(main())
