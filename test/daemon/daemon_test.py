#!/usr/bin/env python3
"""Tests of the real compactiond binary (see test/daemon/CMakeLists.txt).

  daemon_test.py --binary PATH --repo ROOT TEST

Needs the PG* variables of a throwaway cluster (the db_restart test starts
its own with deploy/local/pg.sh). Prints measured figures as "FIGURE ...".
"""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (Daemon, LockHolder, OwnCluster, check,  # noqa: E402
                     connections, drop_schema, free_port, headless_count,
                     insert_headless,
                     insert_materialized, log, materialized_count, psql,
                     psql_file, register, run_cli, scalar, setup_schema,
                     wait_for)
from harness import check_stats_cancelled, locked_topic  # noqa: E402
from harness import parse_test_args, run_one  # noqa: E402

ARGS = None


def schema_name(test):
    return f"d_{test}_{os.getpid()}"


def base_args(schema, app, *extra):
    # Every series per topic: these tests read sweep counters by topic.
    return ["run", "--schema", schema, "--listen", "127.0.0.1:0",
            "--application-name", app, "--metrics-per-topic", "detail",
            *extra]


# --- three topics, different TTLs ---------------------------------------------

def test_ttl_bounds():
    schema = schema_name("ttl")
    app = f"cd_ttl_{os.getpid()}"
    setup_schema(ARGS.binary, schema)
    daemon = None
    holder = None
    try:
        ttls = {"ttl-1s": 1.0, "ttl-2s": 2.0, "ttl-3s": 3.0}
        ids = {n: register(ARGS.binary, schema, n, f"{int(t)}s")
               for n, t in ttls.items()}
        # Interval = clamp(ttl/2, min-interval, max-interval): 1s, 1s, 1.5s.
        min_interval, max_interval = 1.0, 5.0
        daemon = Daemon(ARGS.binary, base_args(
            schema, app, "--min-interval", "1s", "--max-interval", "5s",
            "--stats-interval", "500ms"), name="ttl").start()
        daemon.wait_ready()
        for name, tid in ids.items():
            insert_materialized(schema, tid, 25)
            # Fresh, so it is locked long before it expires.
            insert_headless(schema, tid, 1, age_sql="interval '0'",
                            prefix="locked-")
        holder = LockHolder()
        holder.lock(" ".join(
            f'SELECT 1 FROM "{schema}".compaction_head_{tid} '
            "WHERE message_key = 'locked-1' FOR UPDATE;" for tid in ids.values()
        ).rstrip(";"))
        # Fresh headless rows: they expire exactly ttl from now.
        t0 = time.monotonic()
        # When each topic's rows were in (psql may take a while on a loaded
        # machine): a row expires ttl after its insert, which is no later
        # than this, so the bound below holds from here.
        inserted = {}
        for tid in ids.values():
            insert_headless(schema, tid, 40, age_sql="interval '0'")
            inserted[tid] = time.monotonic()
        # Well before expiry nothing may be deleted (3s topic at +1.2s).
        time.sleep(max(0.0, 1.2 - (time.monotonic() - t0)))
        check(headless_count(schema, ids["ttl-3s"]) == 41,
              "rows of the 3s topic deleted before their TTL")
        slack = 1.5  # the sweep's own time plus scheduling noise on 2 cores
        for name, ttl in sorted(ttls.items(), key=lambda kv: kv[1]):
            interval = min(max(ttl / 2, min_interval), max_interval)
            bound = ttl + interval + slack
            tid = ids[name]
            wait_for(lambda: headless_count(schema, tid) == 1,
                     max(0.1, bound - (time.monotonic() - inserted[tid])),
                     f"{name}: expired rows gone within ttl+interval={bound}s")
            took = time.monotonic() - inserted[tid]
            log(f"{name}: 40 expired rows gone {took:.2f}s after insert "
                f"(bound {bound:.1f}s)")
            print(f"FIGURE ttl_bound topic={name} gone_after_s={took:.2f} "
                  f"bound_s={bound:.1f}")
        for name, tid in ids.items():
            check(materialized_count(schema, tid) == 25,
                  f"{name}: a materialized head was deleted")
            check(headless_count(schema, tid) == 1,
                  f"{name}: the locked headless row was deleted")
        # Metrics match the database once a refresh saw the final state.
        for name, tid in ids.items():
            def matches():
                m = daemon.metrics()
                rows = m.get(("compaction_headless_rows",
                              frozenset({("topic", name)})))
                # A handful of rows: far below the exact-count limit.
                estimated = m.get(("compaction_headless_rows_estimated",
                                   frozenset({("topic", name)})))
                ttl = m.get(("compaction_topic_headless_ttl_seconds",
                             frozenset({("topic", name)})))
                deleted = m.get(("compaction_janitor_deleted_rows_total",
                                 frozenset({("topic", name)})))
                age = m.get(("compaction_headless_oldest_age_seconds",
                             frozenset({("topic", name)})))
                db_rows = headless_count(schema, tid)
                db_ttl = float(scalar(
                    f'SELECT headless_ttl_ms / 1000.0 FROM "{schema}".topic '
                    f"WHERE id = {tid}"))
                db_deleted = float(scalar(
                    f'SELECT total_deleted_rows FROM "{schema}".janitor_state '
                    f"WHERE topic_id = {tid}"))
                db_age = float(scalar(
                    "SELECT extract(epoch FROM now() - min(idle_since)) FROM "
                    f'"{schema}".compaction_head_{tid} WHERE head_id IS NULL'))
                return (rows == db_rows and estimated == 0 and ttl == db_ttl
                        and deleted == db_deleted == 40
                        and age is not None and abs(age - db_age) < 2.0)
            wait_for(matches, 10, f"{name}: /metrics to match the database")
        check(daemon.metric("compaction_topics") == 3, "compaction_topics != 3")
        check(daemon.metric("compaction_up") == 1, "compaction_up != 1")
        # Once the lock is released the (long expired) row goes too.
        holder.release()
        for name, tid in ids.items():
            wait_for(lambda: headless_count(schema, tid) == 0, 6,
                     f"{name}: released row deleted")
        failures = sum(v for (n, _), v in daemon.metrics().items()
                       if n == "compaction_janitor_sweep_failures_total")
        check(failures == 0, f"{failures} sweep failures")
        check(daemon.get("/healthz")[0] == 200, "/healthz not 200")
        check(daemon.get("/nope")[0] == 404, "unknown path not 404")
    finally:
        if holder:
            holder.kill()
        if daemon:
            daemon.stop()
        drop_schema(schema)


# --- 1,000 topics ------------------------------------------------------------

def test_many_topics():
    schema = schema_name("many")
    app = f"cd_many_{os.getpid()}"
    topics = 1000
    pool = 4
    setup_schema(ARGS.binary, schema)
    daemon = None
    try:
        start = time.monotonic()
        # Registration through the library, one process (parallel
        # registrations only contend on the topic table).
        names = [f"t{i:04d}" for i in range(topics)]
        r = run_cli(ARGS.binary, ["topic", "register", *names,
                                  "--headless-ttl", "1h", "--schema", schema],
                    timeout=150)
        errors = [r.stderr] if r.returncode != 0 else []
        check(not errors, f"registration failed: {errors[:1]}")
        log(f"registered {topics} topics in {time.monotonic() - start:.1f}s")
        ids = [int(r[0]) for r in psql(f'SELECT id FROM "{schema}".topic')]
        check(len(ids) == topics, f"{len(ids)} topics registered")
        psql_file("\n".join(
            f"INSERT INTO \"{schema}\".compaction_head_{i} (message_key, "
            "created_at, updated_at, idle_since) VALUES ('k', now() - "
            "interval '2 hours', now() - interval '2 hours', now() - "
            "interval '2 hours');" for i in ids))
        # ttl 1h → interval clamp(30m, 1s, 5s) = 5s: every topic within ~5s.
        daemon = Daemon(ARGS.binary, base_args(
            schema, app, "--pool-size", str(pool), "--max-interval", "5s",
            "--stats-interval", "2s"), name="many").start()
        t0 = time.monotonic()
        samples = []

        def all_swept():
            samples.append(connections(app))
            m = daemon.metrics()
            deleted = sum(v for (n, _), v in m.items()
                          if n == "compaction_janitor_deleted_rows_total")
            swept = sum(1 for (n, _), v in m.items()
                        if n == "compaction_janitor_sweeps_total" and v >= 1)
            return deleted == topics and swept == topics
        wait_for(all_swept, 60, "all 1000 topics swept", interval=0.2)
        took = time.monotonic() - t0
        # Keep sampling through a few more rounds of sweeps and a refresh.
        end = time.monotonic() + 6
        while time.monotonic() < end:
            samples.append(connections(app))
            time.sleep(0.1)
        union = " UNION ALL ".join(
            f'SELECT count(*) AS n FROM "{schema}".compaction_head_{i}'
            for i in ids)
        left = int(scalar(f"SELECT sum(n) FROM ({union}) s"))
        check(left == 0, f"{left} expired rows left")
        rss = daemon.rss_kb()
        max_conn = max(samples)
        check(max_conn <= pool + 1,
              f"{max_conn} connections, more than pool-size+1 = {pool + 1}")
        check(daemon.metric("compaction_topics") == topics,
              "compaction_topics != 1000")
        failures = sum(v for (n, _), v in daemon.metrics().items()
                       if n == "compaction_janitor_sweep_failures_total")
        check(failures == 0, f"{failures} sweep failures")
        scrape = len(daemon.get("/metrics")[1])
        print(f"FIGURE many_topics topics={topics} all_swept_after_s={took:.1f}"
              f" max_connections={max_conn} bound={pool + 1}"
              f" samples={len(samples)} vmrss_kb={rss} scrape_bytes={scrape}")
    finally:
        if daemon:
            daemon.stop()
        drop_schema(schema)


# --- database restarted under the daemon -------------------------------------

def test_db_restart():
    cluster = OwnCluster(ARGS.repo)
    env = cluster.env
    schema = schema_name("restart")
    app = f"cd_restart_{os.getpid()}"
    daemon = None
    try:
        setup_schema(ARGS.binary, schema, env)
        tid = register(ARGS.binary, schema, "orders", "1s", env)
        # Down at start: the daemon keeps running, not ready, up 0.
        cluster.stop_server()
        daemon = Daemon(ARGS.binary, base_args(
            schema, app, "--reconnect-min", "200ms", "--reconnect-max", "1s",
            "--stats-interval", "500ms"), env=env, name="restart").start()
        wait_for(lambda: daemon.get("/readyz")[0] == 503, 5, "/readyz 503")
        check(daemon.metric("compaction_up") == 0, "compaction_up != 0")
        check(daemon.get("/healthz")[0] == 200, "/healthz not 200 while down")
        time.sleep(1.5)  # a few failed reconnects
        check(daemon.proc.poll() is None, "daemon exited with the db down")
        cluster.start_server()
        t = time.monotonic()
        daemon.wait_ready(10)
        log(f"ready {time.monotonic() - t:.2f}s after the database started")
        insert_headless(schema, tid, 30, env=env)
        insert_materialized(schema, tid, 10, env=env)
        wait_for(lambda: headless_count(schema, tid, env) == 0, 5,
                 "first rows swept")
        # Restart under the running daemon.
        pid = daemon.proc.pid
        cluster.stop_server()
        t = time.monotonic()
        wait_for(lambda: daemon.metric("compaction_up") == 0, 10,
                 "compaction_up 0 after the stop")
        down_after = time.monotonic() - t
        check(daemon.get("/readyz")[0] == 503, "/readyz not 503 while down")
        time.sleep(1.0)
        cluster.start_server()
        t = time.monotonic()
        wait_for(lambda: daemon.metric("compaction_up") == 1, 10,
                 "compaction_up 1 after the start")
        daemon.wait_ready(10)
        up_after = time.monotonic() - t
        insert_headless(schema, tid, 30, env=env, prefix="again")
        t = time.monotonic()
        wait_for(lambda: headless_count(schema, tid, env) == 0, 5,
                 "sweeping resumed after the restart")
        check(daemon.proc.pid == pid and daemon.proc.poll() is None,
              "daemon restarted or exited")
        check(materialized_count(schema, tid, env) == 10,
              "a materialized head was lost")
        print(f"FIGURE db_restart up0_after_stop_s={down_after:.2f} "
              f"up1_after_start_s={up_after:.2f} "
              f"swept_after_s={time.monotonic() - t:.2f}")
    finally:
        if daemon:
            daemon.stop()
        cluster.destroy()


# --- kill -9 during a sweep ---------------------------------------------------

def slow_delete_trigger(schema, tid, seconds, env=None):
    psql(f"""CREATE FUNCTION "{schema}".slow_delete() RETURNS trigger
             LANGUAGE plpgsql AS $$
             BEGIN PERFORM pg_sleep({seconds}); RETURN OLD; END $$;
             CREATE TRIGGER slow BEFORE DELETE ON "{schema}".compaction_head_{tid}
             FOR EACH ROW EXECUTE FUNCTION "{schema}".slow_delete();""", env)


def deleting(app, in_trigger=False):
    """Batches of `app` running now (inside the sleeping trigger if asked).

    A headless batch is a call of sweep_headless, whose DELETE runs inside.
    """
    return int(scalar("SELECT count(*) FROM pg_stat_activity WHERE "
                      f"application_name = '{app}' AND state = 'active' AND "
                      "(query ILIKE '%delete%' OR "
                      "query ILIKE '%sweep_headless(%')" +
                      (" AND wait_event = 'PgSleep'" if in_trigger else "")))


def test_kill9():
    schema = schema_name("kill9")
    app = f"cd_kill9_{os.getpid()}"
    setup_schema(ARGS.binary, schema)
    daemons = []
    try:
        tid = register(ARGS.binary, schema, "orders", "1s")
        insert_materialized(schema, tid, 50)
        insert_headless(schema, tid, 40)
        slow_delete_trigger(schema, tid, 0.05)
        args = base_args(schema, app, "--batch-size", "5",
                         "--statement-timeout", "2s", "--claim-ttl", "2s")
        d1 = Daemon(ARGS.binary, args, name="kill9-a").start()
        daemons.append(d1)
        wait_for(lambda: deleting(app) > 0, 10, "a sweep in flight",
                 interval=0.02)
        d1.proc.kill()
        d1.wait_exit(5)
        left = headless_count(schema, tid)
        log(f"killed mid-sweep; {left} of 40 headless rows left")
        check(0 < left, "sweep finished before the kill; no mid-sweep kill")
        check(materialized_count(schema, tid) == 50,
              "materialized head lost after kill -9")
        d2 = Daemon(ARGS.binary, args, name="kill9-b").start()
        daemons.append(d2)
        d2.wait_ready()
        # The dead owner's claim lapses after claim-ttl; then sweeping goes on.
        wait_for(lambda: headless_count(schema, tid) == 0, 20,
                 "sweeping continued after restart")
        check(materialized_count(schema, tid) == 50,
              "materialized head lost after restart")
        print(f"FIGURE kill9 rows_left_at_kill={left}")
    finally:
        for d in daemons:
            d.stop()
        drop_schema(schema)


# --- a connection broken mid-sweep -------------------------------------------

def test_lost_connection():
    """A batch whose connection breaks (a failover, a terminated backend)
    leaves its sweep's claim in janitor_state. The daemon's next sweep takes
    it over at once, instead of skipping the topic as another owner's until
    claim-ttl (60 s here)."""
    schema = schema_name("lostconn")
    app = f"cd_lostconn_{os.getpid()}"
    setup_schema(ARGS.binary, schema)
    daemon = None
    try:
        tid = register(ARGS.binary, schema, "orders", "1s")
        insert_headless(schema, tid, 40)
        slow_delete_trigger(schema, tid, 0.05)
        daemon = Daemon(ARGS.binary, base_args(
            schema, app, "--batch-size", "5", "--claim-ttl", "60s",
            "--reconnect-min", "100ms", "--reconnect-max", "500ms"),
            name="lostconn").start()
        # The pid found while it sleeps in the trigger: between two rows'
        # sleeps (50 ms each) no backend matches, which a separate "is a
        # batch in flight" look followed by this one could fall into.
        pid = wait_for(lambda: sweeping_pid(app), 10, "a batch in flight",
                       interval=0.02)
        psql(f"SELECT pg_terminate_backend({pid})")
        t = time.monotonic()
        wait_for(lambda: daemon.metric(
            "compaction_janitor_sweep_failures_total", topic="orders") == 1,
            10, "the broken batch's sweep failed")
        check(headless_count(schema, tid) > 0, "nothing left to sweep")
        wait_for(lambda: headless_count(schema, tid) == 0, 15,
                 "the rest swept after the broken batch")
        skipped = daemon.metric("compaction_janitor_sweeps_skipped_total",
                                topic="orders")
        check(not skipped, f"{skipped} sweeps skipped their own claim")
        print(f"FIGURE lost_connection swept_after_s="
              f"{time.monotonic() - t:.2f}")
    finally:
        if daemon:
            daemon.stop()
        drop_schema(schema)


# --- signals ------------------------------------------------------------------

def sweeping_pid(app):
    """The pid of the backend running `app`'s batch, inside the trigger, or
    None when none is sleeping there now."""
    pid = scalar("SELECT pid FROM pg_stat_activity WHERE "
                 f"application_name = '{app}' AND state = 'active' AND "
                 "(query ILIKE '%delete%' OR "
                 "query ILIKE '%sweep_headless(%') AND "
                 "wait_event = 'PgSleep' LIMIT 1")
    return int(pid) if pid else None


def sweeping_backend(app):
    """sweeping_pid, which must find one."""
    pid = sweeping_pid(app)
    check(pid is not None, f"no batch of {app} in the trigger")
    return pid


def terminate(app):
    psql("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
         f"WHERE application_name = '{app}'")


def test_sigterm():
    daemons = []
    apps = []
    schemas = []
    # (case, batch, extra args, second signal, exit code, seconds allowed).
    # A "frozen" batch cannot honour its cancel: its backend is stopped
    # with SIGSTOP (deterministic, unlike a trigger that tries to swallow
    # cancels and still loses one that lands between its statements), so
    # only shutdown-timeout or a second signal ends the daemon.
    cases = [
        ("graceful", "sleeping", [], False, 0, (0.0, 5.0)),
        ("timeout", "frozen", ["--shutdown-timeout", "2s"], False, 0,
         (1.8, 5.0)),
        ("second", "frozen", ["--shutdown-timeout", "30s"], True, 1,
         (0.0, 2.0)),
    ]
    try:
        for case, batch, extra, second, want_rc, (lo, hi) in cases:
            app = f"cd_sig_{case}_{os.getpid()}"
            apps.append(app)
            # A schema per case: no other case's stuck rows to sweep.
            schema = schema_name(f"sig{case}")
            schemas.append(schema)
            setup_schema(ARGS.binary, schema)
            tid = register(ARGS.binary, schema, f"orders-{case}", "1s")
            insert_headless(schema, tid, 5)
            slow_delete_trigger(schema, tid, 30)
            d = Daemon(ARGS.binary, base_args(schema, app, *extra),
                       name=f"sigterm-{case}").start()
            daemons.append(d)
            wait_for(lambda: deleting(app, in_trigger=True) > 0, 10,
                     "long sweep in flight", interval=0.05)
            frozen = sweeping_backend(app) if batch == "frozen" else None
            if frozen:
                os.kill(frozen, signal.SIGSTOP)
            t = time.monotonic()
            d.signal(signal.SIGTERM)
            if second:
                time.sleep(0.3)
                d.signal(signal.SIGTERM)
            rc = d.wait_exit(10)
            took = time.monotonic() - t
            if frozen:
                os.kill(frozen, signal.SIGCONT)
            check(rc == want_rc, f"{case}: exit {rc}, want {want_rc}")
            check(lo <= took <= hi,
                  f"{case}: exited after {took:.2f}s, want {lo}..{hi}s")
            if case == "graceful":
                # The batch was cancelled on the server, not left running.
                wait_for(lambda: deleting(app) == 0, 5, "batch cancelled")
            terminate(app)
            check(headless_count(schema, tid) == 5,
                  f"{case}: an interrupted batch deleted rows")
            print(f"FIGURE sigterm case={case} exit={rc} took_s={took:.2f}")
        # A sweep waiting out its batch pause: SIGTERM ends the pause
        # (Janitor::Cancel wakes it), long before the pause or the shutdown
        # timeout would.
        app = f"cd_sig_paused_{os.getpid()}"
        apps.append(app)
        schema = schema_name("sigpaused")
        schemas.append(schema)
        setup_schema(ARGS.binary, schema)
        tid = register(ARGS.binary, schema, "orders-paused", "1s")
        insert_headless(schema, tid, 5)
        d = Daemon(ARGS.binary,
                   base_args(schema, app, "--batch-size", "2",
                             "--batch-pause", "50s",
                             "--shutdown-timeout", "30s"),
                   name="sigterm-paused").start()
        daemons.append(d)
        # The first batch committed: the sweep is in its 50 s pause.
        wait_for(lambda: headless_count(schema, tid) == 3, 15,
                 "first paced batch committed", interval=0.02)
        t = time.monotonic()
        d.signal(signal.SIGTERM)
        rc = d.wait_exit(10)
        took = time.monotonic() - t
        check(rc == 0, f"paused: exit {rc}, want 0")
        check(took <= 3.0, f"paused: exited after {took:.2f}s, want <= 3s")
        check(headless_count(schema, tid) == 3,
              "paused: a batch ran after the pause was cancelled")
        check("sweep cancelled" in d.log_text(),
              "paused: no 'sweep cancelled' log line")
        print(f"FIGURE sigterm case=paused exit={rc} took_s={took:.2f}")
    finally:
        for d in daemons:
            d.stop()
        for app in apps:
            terminate(app)
        for schema in schemas:
            drop_schema(schema)


def test_sighup():
    schema = schema_name("sighup")
    app = f"cd_sighup_{os.getpid()}"
    setup_schema(ARGS.binary, schema)
    workdir = tempfile.mkdtemp(prefix="cd_hup_")
    conf = os.path.join(workdir, "compactiond.conf")
    daemon = None
    try:
        tid = register(ARGS.binary, schema, "orders", "1s")
        # Fresh rows under a long TTL: never swept, only counted.
        kept = register(ARGS.binary, schema, "kept", "1h")
        insert_headless(schema, kept, 50, age_sql="interval '0'")
        with open(conf, "w") as f:
            f.write(f"schema = {schema}\nmin-interval = 1h\nmax-interval = 1h\n"
                    "log-level = info\ntopic-refresh-interval = 1h\n"
                    "stats-interval = 300ms\nstats-exact-count-limit = 10\n")
        daemon = Daemon(ARGS.binary, ["run", "--config", conf, "--listen",
                                      "127.0.0.1:0", "--application-name", app,
                                      "--metrics-per-topic", "detail"],
                        name="sighup").start()
        daemon.wait_ready()
        insert_headless(schema, tid, 50)

        def kept_stats():
            return (daemon.metric("compaction_headless_rows", topic="kept"),
                    daemon.metric("compaction_headless_rows_estimated",
                                  topic="kept"))
        # 50 rows over a limit of 10: an estimate, never below limit + 1.
        wait_for(lambda: kept_stats()[1] == 1, 10, "estimate above the limit")
        check(kept_stats()[0] >= 11, f"estimate below the limit: {kept_stats()}")
        with open(conf, "w") as f:
            f.write(f"schema = {schema}\nmin-interval = 1s\nmax-interval = 1s\n"
                    "log-level = debug\ntopic-refresh-interval = 1h\n"
                    "stats-interval = 300ms\nstats-exact-count-limit = 1000\n")
        r = run_cli(ARGS.binary, ["topic", "register", "late", "--schema",
                                  schema, "--headless-ttl", "1s"])
        check(r.returncode == 0, r.stderr)
        late = int(scalar(f"SELECT id FROM \"{schema}\".topic WHERE name='late'"))
        insert_headless(schema, late, 10)
        check("level=debug" not in daemon.log_text(), "debug before reload")
        daemon.signal(signal.SIGHUP)
        wait_for(lambda: "configuration reloaded" in daemon.log_text(), 5,
                 "reload logged")
        check("max_interval_ms=1000" in daemon.log_text(),
              "reload missed max-interval")
        wait_for(lambda: 'msg="topic interval changed" topic=orders '
                 "interval_ms=1000" in daemon.log_text(), 5,
                 "interval re-timed")
        wait_for(lambda: headless_count(schema, tid) == 0, 5,
                 "rows swept on the new interval")
        wait_for(lambda: daemon.metric("compaction_topics") == 3, 5,
                 "new topic picked up")
        # The new limit applies from the next refresh: an exact count.
        wait_for(lambda: kept_stats() == (50, 0), 5,
                 f"exact count after reload: {kept_stats()}")
        wait_for(lambda: headless_count(schema, late) == 0, 5,
                 "new topic swept")
        wait_for(lambda: "level=debug" in daemon.log_text(), 5,
                 "new log-level applied")
        # An invalid file on SIGHUP keeps the running configuration.
        with open(conf, "w") as f:
            f.write("batch-size = zero\n")
        daemon.signal(signal.SIGHUP)
        wait_for(lambda: "reload failed" in daemon.log_text(), 5,
                 "failed reload logged")
        check("batch-size" in daemon.log_text(), "reload error names no key")
        check(daemon.get("/readyz")[0] == 200, "not ready after bad reload")
        check(daemon.proc.poll() is None, "daemon exited on a bad reload")
    finally:
        if daemon:
            daemon.stop()
        drop_schema(schema)
        shutil.rmtree(workdir, ignore_errors=True)


def test_stderr_closed():
    """A log reader that goes away (a pipe to a shipper that died) must not
    kill the daemon: the next log line fails with EPIPE and is dropped."""
    schema = schema_name("epipe")
    setup_schema(ARGS.binary, schema)
    port = free_port()
    proc = subprocess.Popen(
        [ARGS.binary, "run", "--schema", schema, "--listen",
         f"127.0.0.1:{port}", "--log-level", "info"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        seen = b""
        while b"msg=listening" not in seen:
            line = proc.stderr.readline()
            check(line, f"daemon exited before listening: {seen[-2000:]!r}")
            seen += line
        proc.stderr.close()  # the reader goes away
        proc.send_signal(signal.SIGHUP)  # logs "configuration reloaded"
        time.sleep(1)
        check(proc.poll() is None,
              f"daemon died with the log pipe closed: {proc.returncode}")
        status = urllib.request.urlopen(
            f"http://127.0.0.1:{port}/healthz", timeout=5).status
        check(status == 200, f"/healthz answered {status}")
        proc.send_signal(signal.SIGTERM)
        check(proc.wait(timeout=15) == 0,
              f"exit status {proc.returncode} after SIGTERM")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        drop_schema(schema)


# --- two daemons on one database ---------------------------------------------

def test_two_daemons():
    schema = schema_name("two")
    setup_schema(ARGS.binary, schema)
    daemons = []
    try:
        ids = {f"t{i}": register(ARGS.binary, schema, f"t{i}", "1s")
               for i in range(4)}
        # Every deleted row is logged with the deleting session's name and the
        # server clock, to check afterwards that no two sweeps interleaved.
        psql(f"""CREATE TABLE "{schema}".delete_log (topic_id bigint,
                   app text, at timestamptz, message_key text);
                 CREATE FUNCTION "{schema}".log_delete() RETURNS trigger
                 LANGUAGE plpgsql AS $$ BEGIN
                   INSERT INTO "{schema}".delete_log VALUES
                     (TG_ARGV[0]::bigint, current_setting('application_name'),
                      clock_timestamp(), OLD.message_key);
                   PERFORM pg_sleep(0.002);
                   RETURN OLD; END $$;""")
        for tid in ids.values():
            psql(f'CREATE TRIGGER log BEFORE DELETE ON "{schema}".'
                 f"compaction_head_{tid} FOR EACH ROW EXECUTE FUNCTION "
                 f'"{schema}".log_delete({tid})')
        apps = [f"cd_two_a_{os.getpid()}", f"cd_two_b_{os.getpid()}"]
        for i, app in enumerate(apps):
            daemons.append(Daemon(ARGS.binary, base_args(
                schema, app, "--owner", app, "--batch-size", "10",
                "--min-interval", "200ms", "--max-interval", "500ms",
                "--log-level", "debug"), name=f"two-{i}").start())
        for d in daemons:
            d.wait_ready()
        created = 0
        for wave in range(6):
            for tid in ids.values():
                insert_headless(schema, tid, 60, prefix=f"w{wave}-")
                created += 60
            time.sleep(0.7)

        def deleted_total():
            return sum(v for d in daemons for (n, _), v in d.metrics().items()
                       if n == "compaction_janitor_deleted_rows_total")
        wait_for(lambda: deleted_total() == created, 20,
                 f"{created} rows deleted across both daemons")
        for tid in ids.values():
            check(headless_count(schema, tid) == 0, "rows left")
        logged = int(scalar(f'SELECT count(*) FROM "{schema}".delete_log'))
        distinct = int(scalar("SELECT count(DISTINCT (topic_id, message_key))"
                              f' FROM "{schema}".delete_log'))
        check(logged == created == distinct,
              f"deleted {logged} rows ({distinct} distinct), created {created}")
        per_daemon = [sum(v for (n, _), v in d.metrics().items()
                          if n == "compaction_janitor_deleted_rows_total")
                      for d in daemons]
        # Overlap check: within one sweep's first and last deleted row (server
        # clock), no row of that topic may be deleted by the other daemon.
        sweeps = []
        for d, app in zip(daemons, apps):
            for line in d.log_lines():
                if 'msg="sweep finished"' not in line:
                    continue
                fields = dict(re.findall(r"(\w+)=(\S+)", line))
                if int(fields.get("deleted", "0")) > 0:
                    sweeps.append((app, fields["topic"],
                                   int(fields["started_unix_us"]),
                                   int(fields["finished_unix_us"])))
        violations = 0
        for app, topic, start, end in sweeps:
            tid = ids[topic]
            rows = psql(f"""WITH mine AS (
                  SELECT min(at) AS lo, max(at) AS hi FROM "{schema}".delete_log
                  WHERE topic_id = {tid} AND app = '{app}' AND
                  at BETWEEN to_timestamp({start} / 1e6) - interval '5 ms'
                         AND to_timestamp({end} / 1e6) + interval '5 ms')
                SELECT count(*) FROM "{schema}".delete_log, mine
                WHERE topic_id = {tid} AND app <> '{app}'
                  AND at > mine.lo AND at < mine.hi""")
            violations += int(rows[0][0])
        skipped = sum(v for d in daemons for (n, _), v in d.metrics().items()
                      if n == "compaction_janitor_sweeps_skipped_total")
        check(violations == 0, f"{violations} rows deleted by the other daemon"
              " inside a sweep")
        for d in daemons:
            check(d.get("/readyz")[0] == 200, f"{d.name} not ready")
        print(f"FIGURE two_daemons created={created} deleted_by_a="
              f"{per_daemon[0]:.0f} deleted_by_b={per_daemon[1]:.0f} "
              f"sweeps_checked={len(sweeps)} skipped_by_claim={skipped:.0f}")
    finally:
        for d in daemons:
            d.stop()
        drop_schema(schema)


# --- configuration -------------------------------------------------------------

def expect_config_error(args, key, env=None, what=""):
    r = run_cli(ARGS.binary, args, env=env)
    check(r.returncode == 2, f"{what or args}: exit {r.returncode}, want 2 "
          f"({r.stderr.strip()})")
    check(f"'{key}'" in r.stderr, f"{what or args}: message does not name "
          f"'{key}': {r.stderr.strip()}")


def test_invalid_config():
    workdir = tempfile.mkdtemp(prefix="cd_cfg_")
    try:
        bad_flags = [
            (["--batch-size", "0"], "batch-size"),
            (["--batch-size", "ten"], "batch-size"),
            (["--pool-size", "-1"], "pool-size"),
            (["--min-interval", "5x"], "min-interval"),
            (["--max-interval", "0s"], "max-interval"),
            (["--min-interval", "10s", "--max-interval", "1s"], "max-interval"),
            (["--jitter", "0.9"], "jitter"),
            (["--listen", "nohostport"], "listen"),
            (["--listen", "127.0.0.1:99999"], "listen"),
            (["--log-level", "loud"], "log-level"),
            (["--schema", ""], "schema"),
            (["--db", "host=x password=secret"], "db"),
            (["--db", "postgresql://me:secret@db/app"], "db"),
            (["--db", "host='unterminated"], "db"),
            (["--claim-ttl", "1s", "--statement-timeout", "5s"], "claim-ttl"),
            (["--statement-timeout", "30d", "--claim-ttl", "40d"],
             "statement-timeout"),
            (["--stats-timeout", "30d"], "stats-timeout"),
            (["--stats-exact-count-limit", "0"], "stats-exact-count-limit"),
            (["--stats-exact-count-limit", "9223372036854775807"],
             "stats-exact-count-limit"),
            (["--stats-exact-count-limit", "1e4"], "stats-exact-count-limit"),
            (["--batch-pause", "2m"], "batch-pause"),
            (["--batch-pause", "soon"], "batch-pause"),
            (["--batch-pause", "30s", "--claim-ttl", "30s"], "batch-pause"),
            (["--duty-cycle", "0"], "duty-cycle"),
            (["--duty-cycle", "1.5"], "duty-cycle"),
            (["--min-interval", "9999999999d" * 11], "min-interval"),  # sum overflows
            (["topic", "register", "x", "--headless-ttl", "soon"],
             "headless-ttl"),
        ]
        for args, key in bad_flags:
            expect_config_error(args + ["--check-config"] if args[0] != "topic"
                                else args, key)
        r = run_cli(ARGS.binary, ["--db", "host=x password=secret",
                                  "--check-config"])
        check("secret" not in r.stderr + r.stdout, "password echoed")
        # libpq's own parse error would quote the password of this URI
        # (an unescaped '%'); from the environment it is still never shown.
        env = dict(os.environ, COMPACTIOND_DB="postgresql://u:sekr%zzet@db/app")
        r = run_cli(ARGS.binary, ["--check-config"], env=env)
        check(r.returncode == 2 and "'db'" in r.stderr
              and "sekr" not in r.stderr + r.stdout,
              f"malformed URI from env: {r.returncode} {r.stderr}")
        env = dict(os.environ, COMPACTIOND_STATS_INTERVAL="never")
        expect_config_error(["--check-config"], "stats-interval", env, "env")
        conf = os.path.join(workdir, "bad.conf")
        with open(conf, "w") as f:
            f.write("max-batches = lots\n")
        expect_config_error(["--config", conf, "--check-config"], "max-batches",
                            what="file")
        with open(conf, "w") as f:
            f.write("no-such-key = 1\n")
        r = run_cli(ARGS.binary, ["--config", conf, "--check-config"])
        check(r.returncode == 2 and "no-such-key" in r.stderr,
              f"unknown file key: {r.returncode} {r.stderr}")
        r = run_cli(ARGS.binary, ["--config", "/nonexistent.conf",
                                  "--check-config"])
        check(r.returncode == 2, "missing config file not exit 2")
        for args in (["frobnicate"], ["sweep"], ["stats", "--once"],
                     ["topic", "register"], ["--no-such-flag"]):
            r = run_cli(ARGS.binary, args)
            check(r.returncode == 2, f"{args}: exit {r.returncode}, want 2")
        # Precedence: flag > environment > file > default.
        with open(conf, "w") as f:
            f.write("batch-size = 11\nmax-batches = 12\npool-size = 3\n"
                    "db = host=filehost password=filesecret\n")
        env = dict(os.environ, COMPACTIOND_BATCH_SIZE="21",
                   COMPACTIOND_MAX_BATCHES="22")
        r = run_cli(ARGS.binary, ["--config", conf, "--batch-size", "31",
                                  "--print-config"], env=env)
        check(r.returncode == 0, r.stderr)
        lines = {m[0]: (m[1], m[2]) for m in
                 re.findall(r"^(\S+) = (.*?)\s+# (\w+)$", r.stdout, re.M)}
        check(lines["batch-size"] == ("31", "flag"), f"flag: {lines}")
        check(lines["max-batches"] == ("22", "environment"), f"env: {lines}")
        check(lines["pool-size"] == ("3", "file"), f"file: {lines}")
        check(lines["jitter"] == ("0.1", "default"), f"default: {lines}")
        check("filesecret" not in r.stdout and "********" in r.stdout,
              "print-config did not mask the password")
        # The shipped config file documents exactly the defaults.
        shipped = os.path.join(ARGS.repo, "config", "compactiond.conf")
        a = run_cli(ARGS.binary, ["--config", shipped, "--print-config"],
                    env={k: v for k, v in os.environ.items()
                         if not k.startswith("COMPACTIOND_")})
        b = run_cli(ARGS.binary, ["--print-config"],
                    env={k: v for k, v in os.environ.items()
                         if not k.startswith("COMPACTIOND_")})
        check(a.returncode == 0 and b.returncode == 0, a.stderr + b.stderr)
        strip = lambda s: re.sub(r"\s+#.*$", "", s, flags=re.M)  # noqa: E731
        check(strip(a.stdout) == strip(b.stdout),
              "config/compactiond.conf differs from the built-in defaults")
        check(a.stdout.count("# file") == len(a.stdout.splitlines()),
              "config/compactiond.conf does not set every key")
        for args in (["--help"], ["--version"]):
            r = run_cli(ARGS.binary, args)
            check(r.returncode == 0 and r.stdout, f"{args} failed")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


# --- promtool on a live scrape ---------------------------------------------------

def test_metrics_lint():
    schema = schema_name("lint")
    app = f"cd_lint_{os.getpid()}"
    setup_schema(ARGS.binary, schema)
    daemon = None
    try:
        tid = register(ARGS.binary, schema, "orders", "1s")
        register(ARGS.binary, schema, "gone", "1s")
        insert_headless(schema, tid, 5)
        daemon = Daemon(ARGS.binary, base_args(
            schema, app, "--stats-interval", "500ms"), name="lint").start()
        daemon.wait_ready()
        wait_for(lambda: daemon.metric("compaction_janitor_deleted_rows_total",
                                       topic="orders") == 5, 10, "a sweep")
        status, body = daemon.get("/metrics")
        check(status == 200, "scrape failed")
        promtool = shutil.which("promtool")
        if promtool:
            r = subprocess.run([promtool, "check", "metrics"], input=body,
                               capture_output=True, text=True, timeout=30)
            check(r.returncode == 0 and not (r.stdout + r.stderr).strip(),
                  f"promtool check metrics: {r.stdout}{r.stderr}")
            log("promtool check metrics: clean")
        else:
            log("SKIP promtool not installed")
        script = os.path.join(ARGS.repo, "test/deploy/check_metrics_scrape.sh")
        if os.path.exists(script):
            r = subprocess.run(["bash", script, daemon.url("/metrics")],
                               capture_output=True, text=True, timeout=60)
            check(r.returncode == 0, f"check_metrics_scrape.sh: {r.stdout}"
                  f"{r.stderr}")
        families = set(re.findall(r"^# TYPE (\S+) ", body, re.M))
        helped = set(re.findall(r"^# HELP (\S+) ", body, re.M))
        want = {"compaction_up", "compaction_ready", "compaction_build_info",
                "compaction_topics", "compaction_headless_rows",
                "compaction_headless_rows_estimated",
                "compaction_headless_oldest_age_seconds",
                "compaction_topic_headless_ttl_seconds",
                "compaction_janitor_deleted_rows_total",
                "compaction_janitor_sweeps_total",
                "compaction_janitor_sweep_failures_total",
                "compaction_janitor_sweeps_skipped_total",
                "compaction_janitor_sweep_duration_seconds",
                "compaction_janitor_last_success_timestamp_seconds",
                "compaction_stats_refresh_failures_total",
                "compaction_stats_last_refresh_timestamp_seconds"}
        check(want <= families, f"missing families: {want - families}")
        check(families <= helped, f"without HELP: {families - helped}")
        for (name, labels) in daemon.metrics():
            keys = {k for k, _ in labels} - {"le"}
            allowed = {"version"} if name == "compaction_build_info" else {"topic"}
            check(keys <= allowed, f"{name} has labels {keys}")
        # A destroyed topic's series disappear.
        check(daemon.metric("compaction_headless_rows", topic="gone") is not None,
              "no series for topic 'gone'")
        # Destroyed behind the library's back, announced as it would be.
        psql(f"""DELETE FROM "{schema}".topic WHERE name = 'gone';
                 SELECT pg_notify('compaction_topics', json_build_object(
                   'schema', '{schema}', 'topic', 'gone',
                   'event', 'destroyed')::text)""")
        wait_for(lambda: all(lbl != frozenset({("topic", "gone")})
                             for (_, lbl) in daemon.metrics()), 5,
                 "series of the destroyed topic removed")
        check(daemon.metric("compaction_topics") == 1, "compaction_topics != 1")
    finally:
        if daemon:
            daemon.stop()
        drop_schema(schema)


# --- one-shot subcommands -----------------------------------------------------

def test_cli():
    schema = schema_name("cli")
    app = f"cd_cli_{os.getpid()}"
    setup_schema(ARGS.binary, schema)
    common = ["--schema", schema, "--application-name", app]
    try:
        # No topics: the pass ends at once, printing nothing.
        r = run_cli(ARGS.binary, ["sweep", "--once", *common], timeout=20)
        check(r.returncode == 0 and r.stdout == "",
              f"sweep --once without topics: exit {r.returncode}: {r.stdout}")
        good = register(ARGS.binary, schema, "good", "1s")
        bad = register(ARGS.binary, schema, "bad", "30m")
        insert_headless(schema, good, 7)
        insert_headless(schema, bad, 3)
        insert_materialized(schema, good, 4)
        psql(f"""CREATE FUNCTION "{schema}".refuse() RETURNS trigger
                 LANGUAGE plpgsql AS $$ BEGIN
                   RAISE EXCEPTION 'refusing to delete'; END $$;
                 CREATE TRIGGER refuse BEFORE DELETE ON
                 "{schema}".compaction_head_{bad}
                 FOR EACH ROW EXECUTE FUNCTION "{schema}".refuse();""")
        r = run_cli(ARGS.binary, ["sweep", "--once", *common])
        check(r.returncode == 1, f"sweep --once with a failing topic: exit "
              f"{r.returncode}, want 1\n{r.stdout}{r.stderr}")
        check("topic=good deleted=7" in r.stdout, f"stdout: {r.stdout}")
        check("topic=bad status=failed" in r.stdout, f"stdout: {r.stdout}")
        check(headless_count(schema, good) == 0, "good topic not swept")
        psql(f'DROP TRIGGER refuse ON "{schema}".compaction_head_{bad}')
        r = run_cli(ARGS.binary, ["sweep", "--once", *common])
        check(r.returncode == 0, f"sweep --once: exit {r.returncode}: "
              f"{r.stderr}")
        check(headless_count(schema, bad) == 0, "bad topic not swept")
        check(materialized_count(schema, good) == 4, "materialized head lost")
        r = run_cli(ARGS.binary, ["stats", "--json", *common])
        check(r.returncode == 0, r.stderr)
        stats = {t["topic"]: t for t in json.loads(r.stdout)}
        check(stats["good"]["janitor"]["total_deleted_rows"] == 7, str(stats))
        check(stats["bad"]["headless_ttl_seconds"] == 1800, str(stats))
        # Registering again without --headless-ttl keeps the operator's TTL.
        r = run_cli(ARGS.binary, ["topic", "register", "bad", *common])
        check(r.returncode == 0 and "headless_ttl=30m" in r.stdout,
              f"re-register: {r.returncode} {r.stdout}{r.stderr}")
        check(stats["good"]["headless_rows"] == 0
              and stats["good"]["headless_rows_estimated"] is False, str(stats))
        check("refusing" in (stats["bad"]["janitor"]["last_error"] or "")
              or stats["bad"]["janitor"]["last_error"] == "", str(stats))
        r = run_cli(ARGS.binary, ["topic", "list", "--json", *common])
        names = sorted(t["name"] for t in json.loads(r.stdout))
        check(r.returncode == 0 and names == ["bad", "good"], r.stdout)
        r = run_cli(ARGS.binary, ["stats", *common])
        check(r.returncode == 0 and "good" in r.stdout, r.stdout + r.stderr)
        # Over stats-exact-count-limit the count is an estimate, marked "~".
        insert_headless(schema, good, 5, age_sql="interval '0'")
        r = run_cli(ARGS.binary, ["stats", "--json", *common])
        good_stats = [t for t in json.loads(r.stdout) if t["topic"] == "good"]
        check(good_stats[0]["headless_rows"] == 5
              and not good_stats[0]["headless_rows_estimated"], r.stdout)
        limited = common + ["--stats-exact-count-limit", "2"]
        r = run_cli(ARGS.binary, ["stats", "--json", *limited])
        good_stats = [t for t in json.loads(r.stdout) if t["topic"] == "good"]
        check(good_stats[0]["headless_rows"] >= 3
              and good_stats[0]["headless_rows_estimated"], r.stdout)
        r = run_cli(ARGS.binary, ["stats", *limited])
        check(r.returncode == 0 and " ~" in r.stdout, r.stdout + r.stderr)
        r = run_cli(ARGS.binary, ["topic", "register", "Bad Name!", *common])
        check(r.returncode == 2, f"invalid topic name: exit {r.returncode}")
        env = dict(os.environ, PGPORT="1", PGHOST="127.0.0.1")
        r = run_cli(ARGS.binary, ["topic", "list", *common], env=env)
        check(r.returncode == 1, f"unreachable database: exit {r.returncode}")
    finally:
        drop_schema(schema)


# --- systemd notifications ------------------------------------------------------

def test_systemd_notify():
    import socket
    schema = schema_name("notify")
    app = f"cd_notify_{os.getpid()}"
    setup_schema(ARGS.binary, schema)
    workdir = tempfile.mkdtemp(prefix="cd_sd_")
    path = os.path.join(workdir, "notify.sock")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(path)
    sock.settimeout(0.2)
    messages = []

    def received(what):
        try:
            while True:
                messages.extend(sock.recv(4096).decode().splitlines())
        except socket.timeout:
            pass
        return what in messages
    daemon = None
    try:
        register(ARGS.binary, schema, "orders", "1s")
        env = dict(os.environ, NOTIFY_SOCKET=path, WATCHDOG_USEC="400000")
        daemon = Daemon(ARGS.binary, base_args(schema, app), env=env,
                        name="notify").start()
        wait_for(lambda: received("READY=1"), 10, "READY=1")
        wait_for(lambda: received("WATCHDOG=1")
                 and messages.count("WATCHDOG=1") >= 3, 5,
                 "WATCHDOG=1 every 200ms")
        daemon.signal(signal.SIGTERM)
        check(daemon.wait_exit(5) == 0, "exit after SIGTERM")
        wait_for(lambda: received("STOPPING=1"), 2, "STOPPING=1")
        ready_at = messages.index("READY=1")
        check(any(m.startswith("STATUS=") for m in messages), "no STATUS=")
        print(f"FIGURE systemd_notify messages={len(messages)} "
              f"ready_index={ready_at} "
              f"watchdogs={messages.count('WATCHDOG=1')}")

        # With the database unreachable the daemon still tells systemd it
        # started (so systemd does not kill it while it waits), and /readyz
        # says it is not ready.
        messages.clear()
        down = dict(env, PGHOST="127.0.0.1", PGPORT=str(free_port()))
        daemon = Daemon(ARGS.binary, base_args(schema, app), env=down,
                        name="notify-down").start()
        wait_for(lambda: received("READY=1"), 10, "READY=1 with db down")
        status, _ = daemon.get("/readyz")
        check(status == 503, f"/readyz with db down answered {status}")
        check(daemon.metric("compaction_up") == 0, "compaction_up not 0")
        daemon.signal(signal.SIGTERM)
        check(daemon.wait_exit(5) == 0, "exit after SIGTERM with db down")
    finally:
        if daemon:
            daemon.stop()
        sock.close()
        shutil.rmtree(workdir, ignore_errors=True)
        drop_schema(schema)



# --- stats-timeout on the server ---------------------------------------------

def test_stats_timeout():
    """A stats query that outlives stats-timeout is cancelled on a direct
    connection, with prepared statements (the setting in the startup
    options) and without (set per transaction), even when PGOPTIONS sets
    another statement_timeout (stats-timeout wins over it)."""
    schema = schema_name("stats_timeout")
    holder = locked_topic(ARGS.binary, schema)
    try:
        env = dict(os.environ, PGOPTIONS="-c statement_timeout=0")
        for prepared in ("true", "false"):
            check_stats_cancelled(
                ARGS.binary, ["--schema", schema, "--stats-timeout", "300ms",
                              "--prepared-statements", prepared],
                f"stats under a lock, prepared-statements {prepared}",
                env=env)
    finally:
        holder.kill()
        drop_schema(schema)

def test_stats_retry():
    """A failing statistics refresh (the head table locked, so every query
    of it outlives stats-timeout) is retried a stats-interval later, not
    every second: it is the daemon's heaviest query, and it failed because
    the server was slow."""
    schema = schema_name("stats_retry")
    holder = locked_topic(ARGS.binary, schema)
    daemon = None
    try:
        daemon = Daemon(ARGS.binary, base_args(
            schema, f"cd_stats_retry_{os.getpid()}", "--stats-interval", "20s",
            "--stats-timeout", "200ms"), name="stats_retry").start()
        wait_for(lambda: (daemon.metric(
            "compaction_stats_refresh_failures_total") or 0) >= 1, 10,
            "a first failed refresh")
        time.sleep(6)
        # The start's refresh and the one the topic list asks for: 2 at most
        # (a retry every second would have made 6 or more by now).
        failures = daemon.metric("compaction_stats_refresh_failures_total")
        log(f"FIGURE stats_retry failures_in_6s={failures}")
        check(failures <= 2, f"{failures} failed refreshes in 6 s")
    finally:
        if daemon:
            daemon.stop()
        holder.kill()
        drop_schema(schema)


def test_topics_unlisted():
    """Ready only while the topic list reads: a listing that fails for
    another reason than a lost connection (here the topic table renamed,
    as a schema missing on a new primary or a revoked grant would fail it)
    makes /readyz 503 with the error, and a listing that works again makes
    it 200. Ready used to stay 200 on the stale list."""
    schema = schema_name("unlisted")
    setup_schema(ARGS.binary, schema)
    daemon = None
    try:
        register(ARGS.binary, schema, "orders", "1h")
        daemon = Daemon(ARGS.binary, base_args(
            schema, f"cd_unlisted_{os.getpid()}", "--topic-refresh-interval",
            "1s", "--reconnect-max", "1s"), name="unlisted").start()
        daemon.wait_ready()
        psql(f'ALTER TABLE "{schema}".topic RENAME TO topic_gone')
        wait_for(lambda: daemon.get("/readyz")[0] == 503, 10,
                 "/readyz 503 while the topics cannot be listed")
        status, body = daemon.get("/readyz")
        check("cannot list topics" in body, f"/readyz said: {body!r}")
        check(daemon.metric("compaction_ready") == 0, "compaction_ready not 0")
        psql(f'ALTER TABLE "{schema}".topic_gone RENAME TO topic')
        wait_for(lambda: daemon.get("/readyz")[0] == 200, 10,
                 "/readyz 200 once the topics list again")
    finally:
        if daemon:
            daemon.stop()
        drop_schema(schema)


TESTS = {
    "ttl_bounds": test_ttl_bounds,
    "many_topics": test_many_topics,
    "db_restart": test_db_restart,
    "kill9": test_kill9,
    "lost_connection": test_lost_connection,
    "sigterm": test_sigterm,
    "sighup": test_sighup,
    "stderr_closed": test_stderr_closed,
    "two_daemons": test_two_daemons,
    "invalid_config": test_invalid_config,
    "metrics_lint": test_metrics_lint,
    "cli": test_cli,
    "systemd_notify": test_systemd_notify,
    "stats_timeout": test_stats_timeout,
    "stats_retry": test_stats_retry,
    "topics_unlisted": test_topics_unlisted,
}


def main():
    global ARGS
    ARGS = parse_test_args(TESTS)
    return run_one(ARGS.test, TESTS[ARGS.test])


if __name__ == "__main__":
    sys.exit(main())
