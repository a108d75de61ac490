#!/usr/bin/env python3
"""compactiond topic tail through the real binary (doc/operations.md).

  tail_test.py --binary PATH --repo ROOT TEST

  tail_late_commit  a tail started now prints what commits after it, each
                    message once, including a message whose transaction drew
                    its id before the tail started and committed after a
                    later-numbered one was printed (a read of "ids above the
                    last one printed" loses it); not what was committed
                    before; a hostile key is printed escaped; SIGINT ends it
                    with exit 0; it writes no consumer position.
  tail_heads_json   --from-start --heads-only --json prints each key's
                    current head (a tombstone head included) as one JSON
                    object a line, then follows; SIGTERM ends it with exit 0.
  tail_usage        its usage errors, and --partitions of topic register.

Needs the PG* variables of a throwaway cluster.
"""

import json
import os
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (LockHolder, check, drop_schema, log,  # noqa: E402
                     parse_test_args, psql, run_cli, run_one, scalar,
                     setup_schema, wait_for)

ARGS = None


def produce_sql(schema, tid, key, payload):
    value = "NULL" if payload is None else f"'{payload}'::jsonb"
    return (f"SELECT message_id FROM \"{schema}\".produce_{tid}"
            f"({key}, 1, 0, {value})")


def produce(schema, tid, key, payload):
    psql(produce_sql(schema, tid, key, payload))


class Tail:
    """compactiond topic tail, its stdout read line by line as it comes."""

    def __init__(self, args):
        self.proc = subprocess.Popen([ARGS.binary, "topic", "tail"] + args,
                                     stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        self.lines = []
        self.err = []
        self._threads = [
            threading.Thread(target=self._read, args=(self.proc.stdout,
                                                      self.lines),
                             daemon=True),
            threading.Thread(target=self._read, args=(self.proc.stderr,
                                                      self.err),
                             daemon=True)]
        for t in self._threads:
            t.start()
        wait_for(lambda: any("tailing" in e for e in self.err)
                 or self.proc.poll() is not None, 20, "the tail to start")
        check(self.proc.poll() is None, f"tail exited: {self.err}")

    @staticmethod
    def _read(stream, into):
        for line in stream:
            into.append(line.rstrip("\n"))

    def wait_lines(self, n, what):
        wait_for(lambda: len(self.lines) >= n, 20, what)

    def stop(self, sig):
        self.proc.send_signal(sig)
        try:
            rc = self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise
        for t in self._threads:
            t.join(timeout=5)
        return rc


def register(schema, name, *extra):
    r = run_cli(ARGS.binary, ["topic", "register", name, "--schema", schema]
                + list(extra))
    check(r.returncode == 0, f"topic register: {r.stderr}")
    return int(scalar(f"SELECT id FROM \"{schema}\".topic WHERE name = "
                      f"'{name}'"))


def test_tail_late_commit():
    schema = f"d_tail_{os.getpid()}"
    setup_schema(ARGS.binary, schema)
    os.environ["COMPACTIOND_SCHEMA"] = schema
    holder = None
    tail = None
    try:
        tid = register(schema, "t", "--partitions", "2")
        produce(schema, tid, "'before'", '{"v": 0}')
        # A writer that draws its message id now and commits later.
        holder = LockHolder()
        holder.lock(produce_sql(schema, tid, "'late'", '{"v": 1}'))
        tail = Tail(["t"])
        produce(schema, tid, "'after'", '{"v": 2}')
        produce(schema, tid, "E'evil\\x1b[2J\\nforged'", '{"v": 3}')
        tail.wait_lines(2, "the two messages committed after the start")
        check(not any("late" in line for line in tail.lines),
              f"an uncommitted message was printed: {tail.lines}")
        holder.release()
        holder = None
        tail.wait_lines(3, "the late commit")
        time.sleep(0.3)  # nothing more may come
        lines = list(tail.lines)
        log(f"tail printed: {lines}")
        keys = [line.split(" ")[1] for line in lines]
        check(sorted(keys) == sorted(["key=after", "key=late",
                                      "key=evil\\x1b[2J\\nforged"]),
              f"each committed message once, nothing from before: {lines}")
        check(all("\x1b" not in line for line in lines), "an escape leaked")
        late = [line for line in lines if "key=late" in line][0]
        check('payload={"v":1}' in late and "head=true" in late, late)
        # The late message has the lower id and came after the other one.
        ids = [int(line.split(" ")[0][3:]) for line in lines]
        at_late, at_after = keys.index("key=late"), keys.index("key=after")
        check(ids[at_late] < ids[at_after] and at_late > at_after,
              f"not a late commit: {lines}")
        rc = tail.stop(signal.SIGINT)
        tail = None
        check(rc == 0, f"SIGINT: exit {rc}")
        check(scalar(f"SELECT count(*) FROM \"{schema}\".consumer_position")
              == "0", "the tail wrote a consumer position")
    finally:
        if holder is not None:
            holder.kill()
        if tail is not None:
            tail.proc.kill()
        drop_schema(schema)


def test_tail_heads_json():
    schema = f"d_tailh_{os.getpid()}"
    setup_schema(ARGS.binary, schema)
    os.environ["COMPACTIOND_SCHEMA"] = schema
    tail = None
    try:
        tid = register(schema, "t")
        for key, payload in (("'a'", '{"v": 1}'), ("'a'", '{"v": 2}'),
                             ("'b'", '{"v": 1}'), ("'b'", None),
                             ("'c'", '"x"')):
            produce(schema, tid, key, payload)
        tail = Tail(["t", "--from-start", "--heads-only", "--json"])
        tail.wait_lines(3, "the three heads")
        produce(schema, tid, "'c'", '"y"')
        tail.wait_lines(4, "the new head of c")
        time.sleep(0.3)
        rows = [json.loads(line) for line in tail.lines]
        log(f"tail printed: {rows}")
        got = [(r["key"], r["payload"], r["tombstone"], r["head"])
               for r in rows]
        check(got == [("a", {"v": 2}, False, True), ("b", None, True, True),
                      ("c", "x", False, True), ("c", "y", False, True)],
              f"heads only, in commit order: {got}")
        check(all({"id", "schema_version", "created_at"} <= set(r)
                  for r in rows), f"fields: {rows}")
        rc = tail.stop(signal.SIGTERM)
        tail = None
        check(rc == 0, f"SIGTERM: exit {rc}")
    finally:
        if tail is not None:
            tail.proc.kill()
        drop_schema(schema)


def test_tail_usage():
    schema = f"d_tailu_{os.getpid()}"
    setup_schema(ARGS.binary, schema)
    try:
        for args, want in (
                (["topic", "tail"], "usage: topic tail TOPIC"),
                (["topic", "tail", "a", "b"], "usage: topic tail TOPIC"),
                (["topic", "list", "--from-start"],
                 "'--from-start' is for 'topic tail'"),
                (["topic", "register", "p", "--partitions", "0"],
                 "'partitions'")):
            r = run_cli(ARGS.binary, args + ["--schema", schema])
            check(r.returncode == 2 and want in r.stderr,
                  f"{args}: exit {r.returncode}: {r.stderr}")
        r = run_cli(ARGS.binary, ["topic", "tail", "nosuch", "--schema",
                                  schema])
        check(r.returncode == 1 and "nosuch" in r.stderr,
              f"a missing topic: exit {r.returncode}: {r.stderr}")
        r = run_cli(ARGS.binary, ["topic", "register", "p", "--partitions",
                                  "3", "--schema", schema])
        check(r.returncode == 0 and "partitions=3" in r.stdout,
              f"--partitions: {r.stdout} {r.stderr}")
        check(scalar(f"SELECT partitions FROM \"{schema}\".topic WHERE name "
                     "= 'p'") == "3", "partitions not stored")
    finally:
        drop_schema(schema)


TESTS = {"tail_late_commit": test_tail_late_commit,
         "tail_heads_json": test_tail_heads_json,
         "tail_usage": test_tail_usage}

if __name__ == "__main__":
    ARGS = parse_test_args(TESTS)
    sys.exit(run_one(ARGS.test, TESTS[ARGS.test]))
