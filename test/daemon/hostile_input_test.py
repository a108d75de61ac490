#!/usr/bin/env python3
"""The real compactiond against planted rows and a hostile config file.

  hostile_input_test.py --binary PATH --repo ROOT TEST

planted_timestamps: rows with timestamps no server clock wrote ('infinity',
-infinity, the year 9999), planted as the owner with the user triggers off,
blind neither `compactiond stats` nor /metrics, for their topic or others.
cleaner_lag_backlog: issue 23's probe of the cleaner lag (a backlog walked
in batches of 100 with 1 s pauses reads as the backlog, not 0).
scarce_slots: issue 23's probe of connection scarcity (a login with one
free slot: no /readyz flaps, sweeps go on, a quiet log).
config_hostile: the config file symlinked to /dev/zero, a FIFO, a file over
1 MiB: refused at start and on SIGHUP with a clear error, the daemon stays
healthy, memory does not grow, SIGTERM works during and after.
"""

import os
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (Daemon, TestFailure, check, drop_schema,  # noqa: E402
                     log, psql, register, run_cli, scalar, setup_schema,
                     wait_for)
from harness import parse_test_args, run_one, scratch_dir  # noqa: E402

ARGS = None


def run_args(schema, app, *extra):
    return ["run", "--schema", schema, "--listen", "127.0.0.1:0",
            "--application-name", app, "--min-interval", "1s",
            "--stats-interval", "500ms", *extra]


def planted(schema, table, sql):
    """Runs `sql` with the user triggers of `table` off."""
    psql(f"""ALTER TABLE "{schema}".{table} DISABLE TRIGGER USER;
             {sql};
             ALTER TABLE "{schema}".{table} ENABLE TRIGGER USER""")


# --- planted timestamps ---------------------------------------------------------

def test_planted_timestamps():
    schema = f"d_planted_{os.getpid()}"
    app = f"cd_planted_{os.getpid()}"
    setup_schema(ARGS.binary, schema)
    daemon = None
    try:
        bad = register(ARGS.binary, schema, "bad", "1h")
        good = register(ARGS.binary, schema, "good", "1h")
        for tid in (bad, good):
            psql(f"""UPDATE "{schema}".topic SET retention_ms = 60000,
                     tombstone_retention_ms = 60000 WHERE id = {tid}""")
        psql(f"""INSERT INTO "{schema}".compaction_head_{good}
                 (message_key, created_at, updated_at, idle_since)
                 SELECT 'g', now() - interval '10 minutes',
                        now() - interval '10 minutes',
                        now() - interval '10 minutes'""")
        planted(schema, f"message_{bad}",
                f"""INSERT INTO "{schema}".message_{bad}
                    (message_key, schema_version, compaction_rank, payload,
                     created_at)
                    VALUES ('a', 1, 0, '{{}}', now() - interval '2 hours'),
                           ('inf', 1, 0, '{{}}', 'infinity'),
                           ('far', 1, 0, '{{}}', '9999-01-01'),
                           ('a', 1, 0, '{{}}', now() - interval '2 hours'),
                           ('a', 1, 0, '{{}}', now() - interval '2 hours')""")
        planted(schema, f"compaction_head_{bad}",
                f"""INSERT INTO "{schema}".compaction_head_{bad}
                    (message_key, created_at, updated_at, idle_since)
                    VALUES ('h1', 'infinity', 'infinity', 'infinity'),
                           ('h2', '-infinity', '-infinity', '-infinity'),
                           ('h3', '9999-01-01', '9999-01-01', '9999-01-01')""")
        planted(schema, "log_cleaner_state",
                f"""UPDATE "{schema}".log_cleaner_state
                    SET next_created_at = 'infinity', scanned_at = 'infinity'
                    WHERE topic_id = {bad}""")

        r = run_cli(ARGS.binary, ["stats", "--schema", schema])
        check(r.returncode == 0, f"stats failed: {r.stderr}")
        check("22008" not in r.stdout + r.stderr, f"stats: {r.stdout}")
        r = run_cli(ARGS.binary, ["stats", "--json", "--schema", schema])
        check(r.returncode == 0, f"stats --json failed: {r.stderr}")
        import json
        by_topic = {t["topic"]: t for t in json.loads(r.stdout)}
        check(by_topic["bad"]["stats_error"] == "" and
              by_topic["good"]["stats_error"] == "",
              f"stats --json: {by_topic}")
        check(by_topic["bad"]["invalid_timestamp_rows"] == 3,
              f"invalid rows not counted: {by_topic['bad']}")
        check(by_topic["good"]["headless_oldest_age_seconds"] >= 590,
              f"good topic: {by_topic['good']}")

        daemon = Daemon(ARGS.binary, run_args(
            schema, app, "--cleaner-max-interval", "2s"), name="planted")
        daemon.start()
        daemon.wait_ready()
        wait_for(lambda: (daemon.metric("compaction_headless_oldest_age_seconds",
                                        topic="good") or 0) >= 590, 15,
                 "the good topic's age")
        # metrics-per-topic = basic: one series, summed over topics; the
        # log names the topic.
        wait_for(lambda: daemon.metric("compaction_invalid_timestamp_rows")
                 == 3, 15, "the bad topic's planted rows counted")
        check("rows with invalid timestamps" in daemon.log_text() and
              "topic=bad rows=3" in daemon.log_text(),
              "the log does not name the topic")
        # The cleaner passes the planted messages: a's versions (none is a
        # head) go, the planted ones stay.
        wait_for(lambda: int(scalar(
            f"""SELECT count(*) FROM "{schema}".message_{bad}
                WHERE message_key = 'a'""")) == 0, 60,
                 "the cleaner to pass the planted messages")
        check(int(scalar(f"""SELECT count(*) FROM "{schema}".message_{bad}"""))
              == 2, "the planted messages are kept")
        failures = daemon.metric("compaction_stats_refresh_failures_total")
        check(failures == 0, f"stats refresh failures: {failures}")
        check(daemon.metric("compaction_stats_unreadable_topics") == 0,
              "a topic reported unreadable")
        next_at = scalar(f"""SELECT next_created_at > now() + interval '1 hour'
                             FROM "{schema}".log_cleaner_state
                             WHERE topic_id = {bad}""")
        check(next_at != "t", "the cleaner saved a future next_created_at")
        # Destroyed with its planted rows and registered again: the new
        # topic has none, which is no news ("no more rows ...") about it.
        r = run_cli(ARGS.binary, ["topic", "destroy", "bad", "--yes",
                                  "--schema", schema])
        check(r.returncode == 0, f"topic destroy: {r.stderr}")
        gone_at = time.time()
        wait_for(lambda: (daemon.metric(
            "compaction_stats_last_refresh_timestamp_seconds") or 0)
            > gone_at + 0.1, 15, "a refresh without the destroyed topic")
        register(ARGS.binary, schema, "bad", "1h")
        back_at = time.time()
        wait_for(lambda: (daemon.metric(
            "compaction_stats_last_refresh_timestamp_seconds") or 0)
            > back_at + 0.1, 15, "a refresh with the new topic")
        check("no more rows with invalid timestamps" not in daemon.log_text(),
              "a re-created topic reported as cleaned of planted rows")
    finally:
        if daemon:
            daemon.stop()
        drop_schema(schema)


# --- the cleaner lag while a backlog is walked --------------------------------------

def true_lag(schema, tid):
    return float(scalar(f"""
        SELECT coalesce(extract(epoch FROM (now() - interval '1 minute')
                                - min(m.created_at)), 0)
        FROM "{schema}".message_{tid} m
        WHERE m.created_at < now() - interval '1 minute'
          AND NOT EXISTS (SELECT 1 FROM "{schema}".compaction_head_{tid} h
                          WHERE h.message_key = m.message_key
                            AND h.head_id = m.id)"""))


def test_cleaner_lag_backlog():
    """Issue 23's probe: retention 1 min, 100,000 messages 2 h old, batches
    of 100 with a 1 s pause: the lag must read the backlog all along (the
    shipped CompactionCleanerLagging fires above 1800 s), not 0."""
    schema = f"d_lag_{os.getpid()}"
    app = f"cd_lag_{os.getpid()}"
    setup_schema(ARGS.binary, schema)
    daemon = None
    try:
        tid = register(ARGS.binary, schema, "backlog", "1h")
        psql(f"""UPDATE "{schema}".topic SET retention_ms = 60000
                 WHERE id = {tid}""")
        # 1,000 keys, 100 versions each, the last one the head.
        planted(schema, f"message_{tid}",
                f"""INSERT INTO "{schema}".message_{tid}
                    (message_key, schema_version, compaction_rank, payload,
                     created_at)
                    SELECT 'k' || (g % 1000), 1, 0, '{{}}',
                           now() - interval '2 hours'
                              + g * interval '1 millisecond'
                    FROM generate_series(1, 100000) g""")
        psql(f"""INSERT INTO "{schema}".compaction_head_{tid}
                 (message_key, head_id, schema_version, compaction_rank,
                  created_at, updated_at, idle_since)
                 SELECT message_key, max(id), 1, 0, now(), now(), NULL
                 FROM "{schema}".message_{tid} GROUP BY message_key;
                 ANALYZE "{schema}".message_{tid}""")
        daemon = Daemon(ARGS.binary, run_args(
            schema, app, "--cleaner-batch-size", "100",
            "--cleaner-batch-pause", "1s"),
            name="lag")
        daemon.start()
        daemon.wait_ready()
        wait_for(lambda: int(scalar(
            f"""SELECT count(*) FROM "{schema}".message_{tid}""")) < 100000,
                 60, "the first cleaner batch")
        time.sleep(2)  # a statistics refresh after it
        samples = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            lag = daemon.metric("compaction_cleaner_lag_seconds",
                                topic="backlog")
            truth = true_lag(schema, tid)
            samples.append((lag, truth))
            time.sleep(2)
        log("lag samples (reported, SQL truth): " + ", ".join(
            f"({a:.0f}, {b:.0f})" for a, b in samples))
        remaining = int(scalar(
            f"""SELECT count(*) FROM "{schema}".message_{tid}"""))
        check(remaining > 50000, f"the backlog is gone already ({remaining})")
        for lag, truth in samples[1:]:
            check(lag is not None and lag > 1800,
                  f"lag {lag} would not fire CompactionCleanerLagging")
            # A refresh every 500 ms and a batch every second: the figure
            # trails the truth by at most a few batches' worth (100 ms of
            # message time each) plus the refresh period.
            check(abs(lag - truth) < 10, f"lag {lag} vs truth {truth}")
    finally:
        if daemon:
            daemon.stop()
        drop_schema(schema)


# --- connection scarcity ------------------------------------------------------------

def test_scarce_slots():
    """Issue 23's probe of connection scarcity, with a role's CONNECTION
    LIMIT (the same 53300 refusal as max_connections): the daemon's login
    may open 4 connections, 2 are held elsewhere; LISTEN takes one, the pool
    of 4 gets one. It must keep sweeping with the one it has, stay ready,
    and not log at every refusal."""
    schema = f"d_scarce_{os.getpid()}"
    app = f"cd_scarce_{os.getpid()}"
    role = f"scarce_{os.getpid()}"
    setup_schema(ARGS.binary, schema)
    psql(f"DROP ROLE IF EXISTS {role}")
    psql(f"CREATE ROLE {role} LOGIN CONNECTION LIMIT 4; "
         f"GRANT {os.environ.get('PGUSER', 'postgres')} TO {role}")
    env = dict(os.environ, PGUSER=role)
    holders = []
    daemon = None
    try:
        ids = [register(ARGS.binary, schema, f"t{i}", "1s") for i in range(3)]
        for i in range(2):
            holders.append(subprocess.Popen(
                ["psql", "-X", "-q", "-c", "SELECT pg_sleep(120)"],
                env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        wait_for(lambda: int(scalar(
            f"SELECT count(*) FROM pg_stat_activity WHERE usename = '{role}'"
        )) == 2, 10, "two slots held")
        daemon = Daemon(ARGS.binary, run_args(schema, app, "--pool-size", "4"),
                        env=env, name="scarce")
        daemon.start()
        daemon.wait_ready(30)
        lines_before = len(daemon.log_lines())
        for tid in ids:
            psql(f"""INSERT INTO "{schema}".compaction_head_{tid}
                     (message_key, created_at, updated_at, idle_since)
                     SELECT 'h' || g, now() - interval '1 hour',
                            now() - interval '1 hour', now() - interval '1 hour'
                     FROM generate_series(1, 50) g""")
        flaps = 0
        last = 200
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            status = daemon.get("/readyz")[0]
            if status != last:
                flaps += 1
                last = status
            time.sleep(0.1)
        lines = len(daemon.log_lines()) - lines_before
        left = sum(int(scalar(f"""SELECT count(*) FROM
                                  "{schema}".compaction_head_{tid}"""))
                   for tid in ids)
        log(f"20 s with one slot for the pool: {flaps} /readyz changes, {lines} log "
            f"lines, {left} of 150 expired rows left")
        check(flaps == 0, f"/readyz changed {flaps} times")
        check(left == 0, f"{left} expired rows not swept")
        check(lines <= 20, f"{lines} log lines in 20 s")
    finally:
        if daemon:
            daemon.stop()
        for h in holders:
            h.kill()
            h.wait()
        drop_schema(schema)
        psql(f"DROP ROLE IF EXISTS {role}", check_rc=False)


# --- a hostile config file --------------------------------------------------------

def conf_text(schema, app):
    return (f"schema = {schema}\napplication-name = {app}\n"
            "listen = 127.0.0.1:0\nmin-interval = 1s\n")


def rss_kb(daemon):
    return daemon.rss_kb() or 0


def healthz_ms(daemon):
    started = time.monotonic()
    status, _ = daemon.get("/healthz", timeout=3)
    check(status == 200, f"/healthz answered {status}")
    return (time.monotonic() - started) * 1000


def refused_at_start(conf, why):
    try:
        r = run_cli(ARGS.binary, ["--config", conf, "--check-config"],
                    timeout=20)
    except subprocess.TimeoutExpired:
        raise TestFailure(f"--check-config with {conf} hung for 20 s")
    check(r.returncode != 0 and why in r.stderr,
          f"start with {conf}: rc {r.returncode}, {r.stderr[-500:]}")


def test_config_hostile():
    schema = f"d_conf_{os.getpid()}"
    app = f"cd_conf_{os.getpid()}"
    setup_schema(ARGS.binary, schema)
    workdir = scratch_dir("cd_conf_")
    conf = os.path.join(workdir, "compactiond.conf")
    real = os.path.join(workdir, "real.conf")
    big = os.path.join(workdir, "big.conf")
    fifo = os.path.join(workdir, "fifo.conf")
    with open(real, "w") as f:
        f.write(conf_text(schema, app))
    with open(big, "w") as f:
        f.write(conf_text(schema, app))
        f.write(("# " + "x" * 1000 + "\n") * 1100)  # 1.1 MB of comments
    os.mkfifo(fifo)
    daemons = []
    try:
        # At start: each refused with the reason, none blocks.
        os.symlink("/dev/zero", conf)
        refused_at_start(conf, "not a regular file")
        refused_at_start(fifo, "not a regular file")
        refused_at_start(big, "larger than 1048576 bytes")
        os.unlink(conf)

        for target, why in (("/dev/zero", "not a regular file"),
                            (fifo, "not a regular file"),
                            (big, "larger than 1048576 bytes")):
            os.symlink(real, conf)
            daemon = Daemon(ARGS.binary, ["run", "--config", conf],
                            name=f"conf{len(daemons)}", workdir=workdir)
            daemons.append(daemon)
            daemon.start()
            daemon.wait_ready()
            before = rss_kb(daemon)
            os.unlink(conf)
            os.symlink(target, conf)
            daemon.signal(signal.SIGHUP)
            wait_for(lambda: why in daemon.log_text(), 10,
                     f"the reload refusal of {target}")
            # Healthy and small while and after the reload is refused.
            slowest = max(healthz_ms(daemon) for _ in range(10))
            check(slowest < 1000, f"/healthz took {slowest:.0f} ms")
            check(daemon.get("/readyz")[0] == 200, "not ready after reload")
            time.sleep(1)
            grown = rss_kb(daemon) - before
            check(grown < 20 * 1024, f"RSS grew by {grown} kB")
            log(f"{target}: refused on SIGHUP, /healthz max {slowest:.0f} ms,"
                f" RSS +{grown} kB")
            os.unlink(conf)
            daemon.signal(signal.SIGTERM)
            rc = daemon.wait_exit(15)
            check(rc == 0, f"exit code {rc} after SIGTERM")

        # A reload that never finishes reading must not hold the signals:
        # a FIFO opened by a writer that never writes nor closes. The type
        # check refuses it before any read, so SIGHUP storms and SIGTERM
        # both work.
        os.symlink(real, conf)
        daemon = Daemon(ARGS.binary, ["run", "--config", conf],
                        name="conf_fifo", workdir=workdir)
        daemons.append(daemon)
        daemon.start()
        daemon.wait_ready()
        os.unlink(conf)
        os.symlink(fifo, conf)
        holder = threading.Thread(
            target=lambda: open(fifo, "w").close(), daemon=True)
        holder.start()
        for _ in range(20):
            daemon.signal(signal.SIGHUP)
        check(healthz_ms(daemon) < 1000, "/healthz slow during reloads")
        daemon.signal(signal.SIGTERM)
        rc = daemon.wait_exit(15)
        check(rc == 0, f"exit code {rc} after SIGTERM during reloads")
    finally:
        for d in daemons:
            d.stop()
        drop_schema(schema)


TESTS = {
    "planted_timestamps": test_planted_timestamps,
    "config_hostile": test_config_hostile,
    "cleaner_lag_backlog": test_cleaner_lag_backlog,
    "scarce_slots": test_scarce_slots,
}


def main():
    global ARGS
    ARGS = parse_test_args(TESTS)
    return run_one(ARGS.test, TESTS[ARGS.test])


if __name__ == "__main__":
    sys.exit(main())
