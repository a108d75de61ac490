#!/usr/bin/env python3
"""Evaluates every expression of deploy/grafana/compactiond.json in a real
Prometheus that scrapes a live compactiond.

Against the database of the PG* variables: a fresh schema with two topics,
`compactiond run` on a free port, Debian's `prometheus` scraping it every
second. Then, for each panel target and the `topic` variable:
  - the expression (Grafana's variables replaced as Grafana would for "All")
    parses and evaluates (/api/v1/query answers "success");
  - when every compaction_* metric it reads is in the daemon's /metrics, the
    answer has at least one series (a panel over existing data shows data);
and every compaction_* family the daemon exports is on some panel.
Stops everything it started and drops the schema.

usage: check_dashboard.py COMPACTIOND DASHBOARD_JSON
"""
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

# What Grafana substitutes; rate windows of 10s over a 1s scrape interval.
VARIABLES = {"$topic": ".*", "${topic}": ".*", "$__rate_interval": "10s",
             "$__interval": "2s", "$__range": "1m"}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url, timeout=5):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read().decode()


def query(base, expr):
    url = f"{base}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    try:
        return json.loads(get(url))
    except urllib.error.HTTPError as e:  # 400/422: parse or execution error
        return json.loads(e.read().decode())


def wait_for(what, check, seconds):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except (OSError, LookupError, ValueError):  # not up / no data yet
            pass
        time.sleep(0.25)
    raise SystemExit(f"FAIL timed out after {seconds}s waiting for {what}")


def expressions(dashboard):
    """(where, expr) of every panel target and query variable."""
    out = []

    def walk(panels):
        for p in panels:
            for t in p.get("targets", []):
                out.append((f"panel '{p['title']}' {t['refId']}", t["expr"]))
            walk(p.get("panels", []))
    walk(dashboard["panels"])
    for v in dashboard["templating"]["list"]:
        if v["type"] == "query":
            m = re.match(r"label_values\((.*),\s*(\w+)\)$", v["query"]["query"])
            out.append((f"variable '{v['name']}'", m.group(1)))
    return out


def duplicate_panel_ids(dashboard):
    """Panel ids used twice: Grafana's links, view mode and edits go by id."""
    seen, dups = set(), set()

    def walk(panels):
        for p in panels:
            (dups if p["id"] in seen else seen).add(p["id"])
            walk(p.get("panels", []))
    walk(dashboard["panels"])
    return sorted(dups)


def main():
    binary, dash_path = sys.argv[1:3]
    dashboard = json.load(open(dash_path))
    dups = duplicate_panel_ids(dashboard)
    if dups:
        print(f"FAIL panel ids used more than once: {dups}")
        return 1
    prom = shutil.which("prometheus")
    if not prom:
        print("FAIL prometheus not installed (apt-get install prometheus)")
        return 1
    work = tempfile.mkdtemp(prefix="dash.")
    schema = f"dash_{os.getpid()}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("COMPACTIOND_")}
    env.update(COMPACTIOND_SCHEMA=schema, COMPACTIOND_LOG_LEVEL="warn")
    procs = []
    try:
        run = lambda *a: subprocess.run([binary, *a], env=env, check=True,
                                        capture_output=True, timeout=60)
        run("schema", "install")
        run("topic", "register", "orders", "invoices", "--headless-ttl", "2s",
            "--retention", "2s", "--tombstone-retention", "2s")
        # Consumers of "orders", so the consumer panels have series: the
        # position a first Poll leaves (from the start of the topic), one
        # polled now and one past consumer_inactive_after (7 days).
        subprocess.run(
            ["psql", "-qAtc",
             f"INSERT INTO {schema}.consumer_position (topic_id, consumer, "
             f"partition, done_snapshot, last_poll_at) SELECT t.id, c.name, "
             f"0, '1:1:'::pg_snapshot, now() - c.idle FROM {schema}.topic t, "
             f"(VALUES ('mirror', interval '0'), ('stale', interval '8 days'))"
             f" c(name, idle) WHERE t.name = 'orders'"], check=True, timeout=60)
        port, prom_port = free_port(), free_port()
        procs.append(subprocess.Popen(
            # detail: every family exists from the start (with basic, the
            # failure counters appear at a topic's first failure and the
            # retentions not at all, so their panels stay empty).
            [binary, "run", "--listen", f"127.0.0.1:{port}", "--min-interval", "1s",
             "--cleaner-min-interval", "1s", "--stats-interval", "1s",
             "--metrics-per-topic", "detail"], env=env))
        metrics_url = f"http://127.0.0.1:{port}/metrics"
        wait_for("compactiond /metrics",
                 lambda: "compaction_headless_rows{" in get(metrics_url), 30)
        with open(f"{work}/prometheus.yml", "w") as f:
            f.write("global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
                    "scrape_configs:\n- job_name: compactiond\n"
                    f"  static_configs: [{{targets: ['127.0.0.1:{port}']}}]\n")
        procs.append(subprocess.Popen(
            [prom, f"--config.file={work}/prometheus.yml",
             f"--storage.tsdb.path={work}/data",
             f"--web.listen-address=127.0.0.1:{prom_port}", "--log.level=warn"],
            stdout=subprocess.DEVNULL, stderr=open(f"{work}/prometheus.log", "w")))
        base = f"http://127.0.0.1:{prom_port}"
        # Enough samples for a 10s rate window, and sweeps of both topics.
        wait_for("12 scrapes in Prometheus",
                 lambda: float(query(base, "count_over_time(compaction_up[30s])")
                               ["data"]["result"][0]["value"][1]) >= 12, 60)
        scraped = get(metrics_url)
        exported = set(re.findall(r"^# TYPE (compaction_\w+)", scraped, re.M))
        present = set(re.findall(r"^(compaction_\w+?)(?:\{| )", scraped, re.M))
        exprs = expressions(dashboard)
        failures, covered = [], set()
        for where, raw in exprs:
            expr = raw
            for k in sorted(VARIABLES, key=len, reverse=True):
                expr = expr.replace(k, VARIABLES[k])
            metrics = set(re.findall(r"compaction_\w+", expr))
            for m in metrics:
                families = {f for f in exported
                            if m == f or m.startswith(f + "_")}
                if not families:
                    failures.append(f"{where}: {m} is no metric of compactiond")
                covered |= families
            answer = query(base, expr)
            if answer.get("status") != "success":
                failures.append(f"{where}: {answer.get('errorType')}: "
                                f"{answer.get('error')} in {expr}")
                continue
            n = len(answer["data"]["result"])
            has_data = metrics and all(m in present for m in metrics)
            status = "ok  " if n or not has_data else "FAIL"
            print(f"{status} {n:3d} series  {where}")
            if has_data and n == 0:
                failures.append(f"{where}: no series although {sorted(metrics)} "
                                f"are exported: {expr}")
        for fam in sorted(exported - covered):
            failures.append(f"metric {fam} is on no panel")
        topics = query(base, 'group by (topic) (compaction_topic_headless_ttl_seconds)')
        got = {r["metric"]["topic"] for r in topics["data"]["result"]}
        if not {"orders", "invoices"} <= got:
            failures.append(f"the topic variable's query lists {sorted(got)}")
        for f in failures:
            print("FAIL", f)
        print(f"{len(exprs)} expressions evaluated, {len(exported)} metric "
              f"families exported, {len(failures)} problems")
        return 1 if failures else 0
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()
        subprocess.run(["psql", "-qAtc", f"DROP SCHEMA IF EXISTS {schema} CASCADE"],
                       capture_output=True)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
