#!/usr/bin/env python3
"""A database copied to another cluster by pg_dump and pg_restore
(doc/operations.md, "Moving a database"), through the real binary.

  copy_test.py --binary PATH --repo ROOT TEST

  copy_restore  Two throwaway clusters of the test's own; the old one's
                transaction ids far ahead of the new one's. After the copy,
                `topic tail --from-start` exits 1 naming the cause (it used
                to print only what the new cluster wrote, and follow). After
                the documented epoch raise (pg_resetwal -e), the tail prints
                the copied messages and the new one in order, and a consumer
                position written in the old cluster counts as lag exactly
                what it had not consumed there plus what came after.

Needs PostgreSQL's server binaries (PG_BIN); starts its clusters with
deploy/local/pg.sh.
"""

import json
import os
import signal
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (OwnCluster, PG_BIN, as_postgres, check,  # noqa: E402
                     log, parse_test_args, psql, register, run_cli, run_one,
                     scalar, setup_schema)

ARGS = None
SCHEMA = "copied"


def produce(env, tid, key, value):
    psql(f"SELECT message_id FROM {SCHEMA}.produce_{tid}"
         f"('{key}', 1, 0, '{{\"v\": {value}}}'::jsonb)", env)


def spend_ids(env, n):
    """n transactions that take an id and end."""
    with tempfile.NamedTemporaryFile("w", suffix=".sql", delete=False) as f:
        f.write("SELECT pg_current_xact_id();\n")
    r = subprocess.run([f"{PG_BIN}/pgbench", "-n", "-t", str(n), "-f", f.name,
                        "postgres"], capture_output=True, text=True, env=env,
                       timeout=120)
    os.unlink(f.name)
    check(r.returncode == 0, f"pgbench failed: {r.stderr}")


def tail_from_start(env, seconds):
    """Keys printed by `topic tail --from-start --json` within `seconds`,
    then SIGINT; or the exit code and stderr if it ended by itself."""
    p = subprocess.Popen([ARGS.binary, "topic", "tail", "t", "--from-start",
                          "--json", "--schema", SCHEMA],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, env=env)
    try:
        out, err = p.communicate(timeout=seconds)
        return p.returncode, out, err
    except subprocess.TimeoutExpired:
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=10)
        return None, out, err


def test_copy_restore():
    old, new = OwnCluster(ARGS.repo), OwnCluster(ARGS.repo)
    try:
        # The old cluster has run for a while: its ids are ahead of a new
        # cluster's.
        spend_ids(old.env, 5000)
        setup_schema(ARGS.binary, SCHEMA, old.env)
        tid = register(ARGS.binary, SCHEMA, "t", "1h", old.env)
        produce(old.env, tid, "a", 1)
        # Consumer "c" has consumed "a": its position is the snapshot a
        # reset to the end takes (every committed transaction consumed).
        psql(f"INSERT INTO {SCHEMA}.consumer_position (topic_id, consumer, "
             f"partition, done_snapshot) VALUES ({tid}, 'c', 0, "
             "pg_current_snapshot())", old.env)
        produce(old.env, tid, "b", 2)
        dump = os.path.join(new.dir, "old.dump")
        subprocess.run(["pg_dump", "-Fc", "-f", dump, "-n", SCHEMA,
                        "postgres"], check=True, env=old.env, timeout=120)
        r = subprocess.run(["pg_restore", "-d", "postgres", dump],
                           capture_output=True, text=True, env=new.env,
                           timeout=120)
        check(r.returncode == 0, f"pg_restore failed: {r.stderr}")
        old_next = int(scalar("SELECT pg_snapshot_xmax(pg_current_snapshot())"
                              "::text::bigint", old.env))
        new_next = int(scalar("SELECT pg_snapshot_xmax(pg_current_snapshot())"
                              "::text::bigint", new.env))
        log(f"next transaction id: old cluster {old_next}, copy {new_next}")
        check(new_next + 4000 < old_next, "the copy's ids are not behind")

        # Refused, naming the cause; before, it printed nothing of the copy
        # and followed.
        rc, out, err = tail_from_start(new.env, 10)
        check(rc == 1, f"tail of the copy: exit {rc}, stdout {out!r}, "
              f"stderr {err!r}")
        check("copied from another cluster" in err
              and "Moving a database" in err, f"tail's error: {err!r}")
        check(out == "", f"tail printed {out!r}")

        # The documented way: the copy's epoch above the old cluster's.
        epoch = scalar("SELECT div(pg_current_xact_id()::text::numeric, "
                       "4294967296) + 1", old.env)
        new.stop_server()
        subprocess.run(as_postgres([f"{PG_BIN}/pg_resetwal", "-e", epoch,
                                    "-D", f"{new.dir}/data"]),
                       check=True, capture_output=True, timeout=60)
        new.start_server()
        produce(new.env, tid, "c", 3)
        rc, out, err = tail_from_start(new.env, 3)
        check(rc is None, f"tail after the epoch raise ended: {rc} {err!r}")
        keys = [json.loads(line)["key"] for line in out.splitlines()]
        check(keys == ["a", "b", "c"], f"tail printed keys {keys}")
        r = run_cli(ARGS.binary, ["consumer", "list", "--json", "--schema",
                                  SCHEMA], new.env)
        check(r.returncode == 0, f"consumer list: {r.stderr}")
        lag = [(c["consumer"], c["lag_messages"]) for c in json.loads(r.stdout)]
        check(lag == [("c", 2)], f"consumer lag {lag} (want b and c)")
    finally:
        old.destroy()
        new.destroy()


TESTS = {"copy_restore": test_copy_restore}

if __name__ == "__main__":
    ARGS = parse_test_args(TESTS)
    sys.exit(run_one(ARGS.test, TESTS[ARGS.test]))
