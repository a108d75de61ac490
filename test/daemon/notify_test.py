#!/usr/bin/env python3
"""Hostile NOTIFY payloads against the real compactiond (issue 11).

  notify_test.py --binary PATH

Any role that can connect may NOTIFY compaction_topics. This test sends a
list of malformed payloads while the daemon runs and checks that it stays up,
keeps sweeping, logs the garbage rate-limited without quoting it, keeps its
one listener connection, and still discovers a topic from a valid payload.

It runs in a database of its own with encoding SQL_ASCII: in a UTF8 database
PostgreSQL refuses invalid UTF-8 in a text value before pg_notify sees it
(E'\\xff' fails with "invalid byte sequence for encoding UTF8"), but in a
SQL_ASCII database any byte goes through, so invalid UTF-8 does reach the
listener there. Needs the PG* variables of a throwaway cluster (superuser).
"""

import argparse
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (Daemon, check, drop_schema,  # noqa: E402
                     headless_count, insert_headless, log, psql, register,
                     run_one, setup_schema, wait_for)

MARKER = "hostile-marker-q7z"  # must never show up in the daemon's log


def hostile_payloads(schema):
    """(description, SQL expression of the payload) pairs."""
    def lit(text):
        return "$p$" + text + "$p$"
    ours = f'"schema":"{schema}"'
    deep_arrays = "[" * 3999 + "]" * 3999               # 7,998 bytes
    deep_objects = '{"a":' * 1300 + "1" + "}" * 1300   # 7,801 bytes
    long_string = '"' + MARKER + "x" * (7997 - len(MARKER)) + '"'  # 7,999
    pad = "y" * (7999 - len('{"schema":1,"pad":""}'))
    return [
        # Wrong types, field by field; the old parser threw type_error.302.
        ("schema is a number", lit('{"schema":1}')),
        ("topic is an array", lit('{"topic":[1]}')),
        ("event is an object", lit('{"event":{}}')),
        ("our schema, topic an array",
         lit('{' + ours + ',"topic":[1],"event":"registered"}')),
        ("our schema, event an object",
         lit('{' + ours + ',"topic":"t","event":{}}')),
        ("our schema, topic null", lit('{' + ours + ',"topic":null,'
                                       '"event":"registered"}')),
        ("schema an object", lit('{"schema":{"' + MARKER + '":1},'
                                 '"topic":"t","event":"e"}')),
        ("schema a huge number", lit('{"schema":1e99999,"topic":"t"}')),
        ("schema a long integer", lit('{"schema":' + "9" * 400 + '}')),
        # Roots that are not objects.
        ("array root", lit('[]')),
        ("array of the right object",
         lit('[{' + ours + ',"topic":"t","event":"registered"}]')),
        ("null root", lit('null')),
        ("string \"null\"", lit('"null"')),
        ("number root", lit('-0')),
        ("true root", lit('true')),
        # Not JSON at all.
        ("empty payload", "''"),
        ("lone brace", lit('{')),
        ("plain text", lit('not json ' + MARKER)),
        ("trailing garbage", lit('{' + ours + ',"topic":"t","event":"e"} x')),
        # As deep and as long as 8,000 bytes allow.
        ("3,999 nested arrays", lit(deep_arrays)),
        ("1,300 nested objects", lit(deep_objects)),
        ("7,999 unclosed brackets", lit("[" * 7999)),
        ("7,999-byte string", lit(long_string)),
        ("7,999-byte object, schema a number",
         lit('{"schema":1,"pad":"' + pad + '"}')),
        # Invalid UTF-8 (raw bytes: this database is SQL_ASCII).
        ("0xff in schema", "E'{\"schema\":\"\\xff\",\"topic\":\"t\"}'"),
        ("lone 0xff", "E'\\xff'"),
        ("truncated sequence in topic",
         "E'{" + ours.replace("'", "''") + ",\"topic\":\"\\xc3\","
         "\"event\":\"registered\"}'"),
        ("encoded surrogate", "E'\"\\xed\\xa0\\x80\"'"),
        ("escaped lone surrogate", lit('{"schema":"\\ud800"}')),
    ]


def notify(expr, env):
    psql(f"SELECT pg_notify('compaction_topics', {expr})", env)


def notify_flood(daemon, schema, env):
    """1,000 well-formed notifications naming our schema, one transaction
    each, 3 ms apart, as any role may send them: (topic lists the daemon ran
    meanwhile, seconds the flood took). Each asks for a topic refresh."""
    def listed():
        return daemon.log_text().count('msg="topics listed"')
    payload = ('{"schema":"' + schema + '","topic":"flood-%s",'
               '"event":"registered"}')
    before = listed()
    started = time.monotonic()
    psql("DO $f$ BEGIN FOR i IN 1..1000 LOOP PERFORM pg_notify("
         "'compaction_topics', pg_catalog.format($p$" + payload +
         "$p$, i)); COMMIT; PERFORM pg_catalog.pg_sleep(0.003); END LOOP; "
         "END $f$", env)
    took = time.monotonic() - started
    time.sleep(1.5)  # the last refresh it asked for
    return listed() - before, took


def deleted_total(daemon, topic):
    return daemon.metric("compaction_janitor_deleted_rows_total",
                         topic=topic) or 0


def run(binary):
    pid = os.getpid()
    dbname = f"d_notify_{pid}"
    schema = f"d_notify_{pid}"
    app = f"cd_notify_{pid}"
    psql(f'DROP DATABASE IF EXISTS "{dbname}"')
    psql(f"CREATE DATABASE \"{dbname}\" TEMPLATE template0 "
         "ENCODING 'SQL_ASCII' LC_COLLATE 'C' LC_CTYPE 'C'")
    env = dict(os.environ, PGDATABASE=dbname)
    daemon = None
    try:
        setup_schema(binary, schema, env)
        hot = register(binary, schema, "hot", "1s", env)
        # No periodic topic refresh during the test: a new topic can only be
        # found through the listener.
        daemon = Daemon(binary, [
            "run", "--schema", schema, "--listen", "127.0.0.1:0",
            "--application-name", app, "--min-interval", "1s",
            "--max-interval", "1s", "--stats-interval", "500ms",
            "--topic-refresh-interval", "1h", "--log-level", "debug",
            "--metrics-per-topic", "detail"], env=env, name="notify").start()
        daemon.wait_ready()
        insert_headless(schema, hot, 20, env=env, prefix="before-")
        wait_for(lambda: headless_count(schema, hot, env) == 0, 10,
                 "rows swept before the payloads")
        wait_for(lambda: deleted_total(daemon, "hot") >= 20, 5,
                 "deleted rows counted")
        before = deleted_total(daemon, "hot")

        payloads = hostile_payloads(schema)
        started = time.monotonic()
        for what, expr in payloads:
            notify(expr, env)
            check(daemon.proc.poll() is None,
                  f"daemon exited ({daemon.proc.returncode}) after: {what}")
        # PostgreSQL itself refuses 8,000 bytes: nothing longer reaches us.
        r = subprocess.run(["psql", "-X", "-At", "-c", "SELECT pg_notify("
                            "'compaction_topics', repeat('x', 8000))"],
                           capture_output=True, text=True, env=env, timeout=30)
        check(r.returncode != 0 and "payload string too long" in r.stderr,
              f"an 8,000-byte payload was not refused: {r.stderr!r}")
        # Notifications arrive in order: once the listener logs this valid
        # one (debug level), it has handled every payload above.
        notify("$p${" + f'"schema":"{schema}","topic":"sync-marker",'
               '"event":"registered"}$p$', env)
        wait_for(lambda: "topic=sync-marker" in daemon.log_text(), 10,
                 "the listener to handle the payloads")
        sent_for = time.monotonic() - started
        log(f"FIGURE hostile_payloads={len(payloads)} sent_in_s={sent_for:.1f}")
        check(daemon.proc.poll() is None,
              f"daemon exited with {daemon.proc.returncode}")
        check(daemon.get("/healthz")[0] == 200, "/healthz not 200")

        # It keeps sweeping rows that expire after the payloads.
        insert_headless(schema, hot, 30, env=env, prefix="after-")
        wait_for(lambda: headless_count(schema, hot, env) == 0, 10,
                 "rows inserted after the payloads swept")
        wait_for(lambda: deleted_total(daemon, "hot") >= before + 30, 5,
                 "compaction_janitor_deleted_rows_total to grow by 30")

        # A valid payload (the library's own, from `topic register`) still
        # makes the daemon discover a new topic.
        late = register(binary, schema, "late", "1s", env)
        insert_headless(schema, late, 10, env=env)
        wait_for(lambda: daemon.metric("compaction_topics") == 2, 10,
                 "the topic registered after the payloads discovered")
        wait_for(lambda: headless_count(schema, late, env) == 0, 10,
                 "the new topic swept")

        lists, took = notify_flood(daemon, schema, env)
        log(f"FIGURE notify_flood=1000 sent_in_s={took:.2f} "
            f"topic_lists={lists}")
        check(lists <= took + 3,
              f"1,000 notifications in {took:.2f}s listed the topics "
              f"{lists} times")
        check(daemon.proc.poll() is None, "daemon exited")

        text = daemon.log_text()
        warnings = [line for line in text.splitlines()
                    if 'msg="ignored malformed notification"' in line]
        log(f"FIGURE malformed_warnings={len(warnings)} "
            f"first={warnings[0] if warnings else None!r}")
        check(warnings, "malformed payloads not logged")
        # One warning per 10 s at most (plus the first).
        check(len(warnings) <= 1 + int(sent_for / 10) + 1,
              f"{len(warnings)} warnings in {sent_for:.1f}s: not rate-limited")
        check(MARKER not in text, "a payload was echoed into the log")
        check(text.count("component=listener msg=listening") == 1,
              "the listener reconnected: a payload broke its session")
        check(daemon.proc.poll() is None, "daemon exited")
    finally:
        if daemon:
            daemon.stop()
        drop_schema(schema, env)
        psql(f'DROP DATABASE IF EXISTS "{dbname}" WITH (FORCE)',
             check_rc=False)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--binary", required=True)
    args = p.parse_args()
    return run_one("hostile_notify", lambda: run(args.binary))


if __name__ == "__main__":
    sys.exit(main())
