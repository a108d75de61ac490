#!/usr/bin/env python3
"""deploy/local/run.sh as a newcomer runs it (issue 22).

  run_script_test.py SOURCE_DIR BUILD_DIR demo|port_taken

demo        run.sh --seconds 25 --port P: exit 0, says what it builds, shows
            the build, and its metrics show compactiond up, headless rows
            swept, the log cleaner deleting messages and a log size above 0
port_taken  the port held by another socket: exit non-zero with compactiond's
            own "cannot listen ... Address already in use"

BUILD_DIR is this test build (BUILD_DIR= for run.sh), so the demo builds
nothing new and writes no build-local/ into the source tree. run.sh starts
its own cluster.
"""
import os
import re
import socket
import subprocess
import sys


def fail(message):
    print(f"FAIL {message}", flush=True)
    sys.exit(1)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def run(src, build, *args, timeout=300):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PG", "COMPACTIOND_"))}
    env["BUILD_DIR"] = build
    return subprocess.run(["bash", os.path.join(src, "deploy/local/run.sh"),
                           *args], capture_output=True, text=True, env=env,
                          timeout=timeout)


def metric(text, name):
    values = [float(m.group(1)) for m in re.finditer(
        rf"^{name}(?:{{[^}}]*}})? (\S+)$", text, re.M)]
    return sum(values) if values else None


def test_demo(src, build):
    r = run(src, build, "--seconds", "25", "--port", str(free_port()))
    out = r.stdout + r.stderr
    if r.returncode != 0:
        fail(f"run.sh --seconds 25: exit {r.returncode}\n{out[-4000:]}")
    for want in ("== building", "Built target compactiond", "== scenarios",
                 "metrics:  http://127.0.0.1:", "== after 25 s =="):
        if want not in out:
            fail(f"output lacks {want!r}:\n{out[-4000:]}")
    tail = r.stdout[r.stdout.index("== after 25 s =="):]
    checks = {
        "compaction_up": lambda v: v == 1,
        "compaction_janitor_deleted_rows_total": lambda v: v > 0,
        "compaction_cleaner_deleted_messages_total": lambda v: v > 0,
        "compaction_log_messages": lambda v: v > 0,
    }
    for name, ok in checks.items():
        value = metric(tail, name)
        if value is None or not ok(value):
            fail(f"{name} = {value}:\n{tail}")
    print("FIGURE run_sh_demo " + " ".join(
        f"{n}={metric(tail, n):g}" for n in checks), flush=True)


def test_port_taken(src, build):
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen(1)
    port = holder.getsockname()[1]
    try:
        r = run(src, build, "--seconds", "5", "--port", str(port))
    finally:
        holder.close()
    out = r.stdout + r.stderr
    if r.returncode == 0:
        fail(f"exit 0 with port {port} taken:\n{out[-3000:]}")
    if "cannot listen" not in r.stderr or "Address already in use" \
            not in r.stderr:
        fail(f"no daemon error on stderr:\n{r.stderr[-3000:]}")
    if "metrics:  http://" in out:
        fail("printed the metrics URL of a daemon that is not there")
    print(f"FIGURE run_sh_port_taken exit={r.returncode}", flush=True)


def main():
    src, build, test = sys.argv[1:4]
    {"demo": test_demo, "port_taken": test_port_taken}[test](src, build)
    print(f"PASS {test}", flush=True)


if __name__ == "__main__":
    main()
