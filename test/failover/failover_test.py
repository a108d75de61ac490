"""Failover: a primary + synchronous streaming standby (deploy/local/standby.sh),
writers and compactiond on a multi-host conninfo with
target_session_attrs=read-write; the primary is stopped (fast or immediate)
and the standby promoted.

Asserts: no acknowledged write lost, every committed increment counted once
(failover_writer checks both on the new primary), every message in the log
delivered to a consumer that polled all along (never refused for transaction
ids ahead of the new primary's), no libpq notice on the
writer's or the daemon's stderr, compactiond ready again (and a sweep done)
within 10 s of the promote. Prints one FIGURE line with the outcome counts
and the ready time. The `fast` case first runs failover_tests (a backend
terminated after its commit record) on the same pair.

    failover_test.py --binary COMPACTIOND --writer W --sync-tests T
                     --repo ROOT fast|immediate
"""

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "daemon"))
from harness import (Daemon, TestFailure, check, log, run_cli,  # noqa: E402
                     wait_for)

READY_BOUND_S = 10.0


def parse_env(path):
    env = dict(os.environ)
    with open(path) as f:
        for line in f:
            key, _, value = line.removeprefix("export ").strip().partition("=")
            env[key] = value.strip("'")
    return env


class Pair:
    def __init__(self, repo):
        self.script = os.path.join(repo, "deploy", "local", "standby.sh")
        self.dir = tempfile.mkdtemp(prefix="cfo.", dir="/tmp")
        subprocess.run(["bash", self.script, "start", self.dir], check=True,
                       timeout=120)
        self.env = parse_env(os.path.join(self.dir, "env"))

    def run(self, *args):
        subprocess.run(["bash", self.script, args[0], self.dir, *args[1:]],
                       check=True, timeout=90)

    def destroy(self):
        subprocess.run(["bash", self.script, "stop", self.dir], timeout=60)


def last_success(daemon, topic):
    value = daemon.metric("compaction_janitor_last_success_timestamp_seconds",
                          topic=topic)
    return value or 0.0


def failover(args, pair, mode):
    env, conninfo = pair.env, pair.env["FAILOVER_CONNINFO"]
    schema = f"fo_{mode}_{os.getpid()}"
    for cmd in (["schema", "install"],
                ["topic", "register", "counters", "--headless-ttl", "1s"]):
        r = run_cli(args.binary, cmd + ["--db", conninfo, "--schema", schema],
                    env)
        check(r.returncode == 0, f"{cmd} failed: {r.stderr}")
    daemon = Daemon(args.binary, [
        "run", "--db", conninfo, "--schema", schema, "--listen", "127.0.0.1:0",
        "--reconnect-min", "100ms", "--reconnect-max", "500ms"],
        env=env, name=f"compactiond_{mode}").start()
    writer_err = tempfile.TemporaryFile(mode="w+")
    writer = subprocess.Popen(
        [args.writer, conninfo, schema, "counters", "4", "2", "4"],
        stdout=subprocess.PIPE, stderr=writer_err, text=True, env=env)
    try:
        daemon.wait_ready(20)
        wait_for(lambda: last_success(daemon, "counters") > 0, 15,
                 "a first sweep")
        time.sleep(2.0)  # writers in full swing (they run until SIGTERM)
        check(writer.poll() is None, "writer exited early")
        t_stop = time.monotonic()
        pair.run("stop-primary", mode)
        pair.run("promote")
        promoted_wall = time.time()
        t_promoted = time.monotonic()
        log(f"primary stopped ({mode}) and standby promoted in "
            f"{t_promoted - t_stop:.2f}s")
        wait_for(lambda: daemon.get("/readyz")[0] == 200 and
                 last_success(daemon, "counters") > promoted_wall,
                 READY_BOUND_S, "compactiond ready and sweeping after the "
                 "promote", interval=0.05)
        ready_s = time.monotonic() - t_promoted
        time.sleep(2.0)  # writers go on against the new primary
        writer.send_signal(signal.SIGTERM)
        # The writers' last commit checks (up to 15 s), then the
        # consumer's drain (up to 30 s), then the verification.
        out, _ = writer.communicate(timeout=120)
    finally:
        if writer.poll() is None:
            writer.kill()
            writer.wait()
        daemon.stop()
    writer_err.seek(0)
    err = writer_err.read()
    summary = json.loads(out.strip().splitlines()[-1]) if out.strip() else {}
    log(f"writer: {json.dumps(summary)}")
    check(summary, f"writer printed no summary (rc {writer.returncode}): {err}")
    check(summary["not_consumed"] == 0 and summary["polls_ahead"] == 0
          and summary["consumed"] > 0,
          f"the consumer missed messages or was refused: {summary}")
    check(writer.returncode == 0 and summary["produces_lost"] == 0 and
          summary["bad_keys"] == 0,
          f"acknowledged writes lost or increments miscounted: {summary}")
    check(summary["increments_acked"] > 0 and summary["produces_acked"] > 0,
          "the writers made no progress")
    # libpq's default notice processor prints "FATAL:  ..." or "WARNING:  ..."
    # as a line of its own; the daemon's log lines start with ts=.
    for name, text in (("writer", err), ("compactiond", daemon.log_text())):
        raw = [line for line in text.splitlines()
               if line.startswith(("FATAL:", "WARNING:", "NOTICE:", "ERROR:"))]
        check(not raw, f"raw libpq notice on {name}'s stderr: {raw[:3]}")
    print(f"FIGURE failover_{mode} "
          f"increments_acked={summary['increments_acked']} "
          f"increments_unknown={summary['increments_unknown']} "
          f"produces_acked={summary['produces_acked']} "
          f"produces_unknown={summary['produces_unknown']} "
          f"connection_lost_retried={summary['connection_lost_retried']} "
          f"other_errors={summary['other_errors']} lost_writes=0 "
          f"compactiond_ready_s={ready_s:.2f}", flush=True)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--binary", required=True)
    p.add_argument("--writer", required=True)
    p.add_argument("--sync-tests", required=True)
    p.add_argument("--repo", required=True)
    p.add_argument("mode", choices=["fast", "immediate"])
    args = p.parse_args()
    t = time.monotonic()
    pair = Pair(args.repo)
    try:
        if args.mode == "fast":
            r = subprocess.run([args.sync_tests], env=pair.env, timeout=120)
            check(r.returncode == 0, "failover_tests failed")
        failover(args, pair, args.mode)
    except TestFailure as e:
        print(f"FAIL failover.{args.mode}: {e}", flush=True)
        for d in Daemon.instances:
            print("\n".join(d.log_lines()[-40:]), flush=True)
        return 1
    finally:
        pair.destroy()
    print(f"PASS failover.{args.mode} ({time.monotonic() - t:.1f}s)",
          flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
