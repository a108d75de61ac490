"""Helpers for driving the real compactiond binary against PostgreSQL.

Python 3 standard library plus `psql`. Every wait polls with a deadline; no
test sleeps unboundedly. Each test uses its own schema (d_<name>_<pid>) and
application_name so tests can share one cluster.
"""

import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request

METRIC_LINE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([^}]*)\})?\s+(\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')
PG_BIN = os.environ.get("PG_BIN", "/usr/lib/postgresql/15/bin")


class TestFailure(Exception):
    pass


def check(condition, message):
    if not condition:
        raise TestFailure(message)


# Directories made by scratch_dir (daemon logs, config files), removed by
# run_one when the test passes.
_SCRATCH_DIRS = []


def scratch_dir(prefix):
    """A new directory under the system's temporary one, removed when the
    test passes (run_one); a failed test's are kept for its logs."""
    path = tempfile.mkdtemp(prefix=prefix)
    _SCRATCH_DIRS.append(path)
    return path


def remove_scratch_dirs():
    while _SCRATCH_DIRS:
        shutil.rmtree(_SCRATCH_DIRS.pop(), ignore_errors=True)


def log(message):
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def wait_for(predicate, timeout, what, interval=0.1):
    """Polls predicate() until it returns a truthy value or timeout passes."""
    deadline = time.monotonic() + timeout
    last_error = None
    while time.monotonic() < deadline:
        try:
            value = predicate()
            if value:
                return value
        except Exception as e:  # the daemon may not be listening yet
            last_error = e
        time.sleep(interval)
    raise TestFailure(f"timed out after {timeout}s waiting for {what}"
                      + (f" (last error: {last_error})" if last_error else ""))


def psql(sql, env=None, check_rc=True):
    """Runs SQL with psql; returns stdout rows as lists of strings."""
    r = subprocess.run(["psql", "-X", "-At", "-q", "-v", "ON_ERROR_STOP=1",
                        "-F", "\t", "-c", sql],
                       capture_output=True, text=True, env=env, timeout=120)
    if check_rc and r.returncode != 0:
        raise TestFailure(f"psql failed: {r.stderr.strip()}\nSQL: {sql[:500]}")
    return [line.split("\t") for line in r.stdout.splitlines() if line]


def psql_file(sql, env=None):
    with tempfile.NamedTemporaryFile("w", suffix=".sql", delete=False) as f:
        f.write(sql)
        path = f.name
    try:
        r = subprocess.run(["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1",
                            "-f", path], capture_output=True, text=True,
                           env=env, timeout=300)
        if r.returncode != 0:
            raise TestFailure(f"psql -f failed: {r.stderr.strip()[:2000]}")
    finally:
        os.unlink(path)


def scalar(sql, env=None):
    rows = psql(sql, env)
    return rows[0][0] if rows else None


class LockHolder:
    """A psql session that holds row locks in an open transaction."""

    def __init__(self, env=None):
        self.app = f"cd_lockholder_{os.getpid()}"
        env = dict(env if env is not None else os.environ, PGAPPNAME=self.app)
        self.proc = subprocess.Popen(
            ["psql", "-X", "-At", "-q", "-v", "ON_ERROR_STOP=1"],
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL, text=True, env=env)

    def lock(self, sql):
        # psql buffers its output on a pipe, so watch the session instead.
        self.proc.stdin.write("BEGIN;\n" + sql + ";\n")
        self.proc.stdin.flush()
        wait_for(lambda: scalar(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = "
            f"'{self.app}' AND state = 'idle in transaction'") == "1",
            10, "the lock session to hold its locks")
        check(self.proc.poll() is None, "lock session ended")

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def release(self):
        self.proc.stdin.write("COMMIT;\n\\q\n")
        self.proc.stdin.flush()
        self.proc.wait(timeout=10)


def parse_metrics(text):
    """{(name, frozenset(labels.items())): float} of a text exposition."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = METRIC_LINE.match(line)
        check(m, f"unparsable metrics line: {line!r}")
        labels = frozenset(LABEL.findall(m.group(3) or ""))
        out[(m.group(1), labels)] = float(m.group(4))
    return out


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Daemon:
    """One compactiond process with its stderr in a log file."""

    instances = []  # every daemon started, for logs on failure

    def __init__(self, binary, args, env=None, name="daemon", workdir=None):
        self.binary = binary
        self.args = list(args)
        self.env = dict(env if env is not None else os.environ)
        self.name = name
        self.workdir = workdir or scratch_dir("cd_")
        self.log_path = os.path.join(self.workdir, f"{name}.log")
        self.proc = None
        self.port = None

    def start(self):
        Daemon.instances.append(self)
        self.log_file = open(self.log_path, "ab")
        self.proc = subprocess.Popen([self.binary] + self.args,
                                     stdout=self.log_file,
                                     stderr=self.log_file, env=self.env)
        self.port = wait_for(self._bound_port, 15, f"{self.name} to listen")
        return self

    def _bound_port(self):
        if self.proc.poll() is not None:
            raise TestFailure(f"{self.name} exited with {self.proc.returncode}"
                              f":\n{self.log_text()[-3000:]}")
        for line in self.log_lines():
            if "component=http msg=listening" in line:
                return int(re.search(r"port=(\d+)", line).group(1))
        return None

    def log_text(self):
        with open(self.log_path, "r", errors="replace") as f:
            return f.read()

    def log_lines(self):
        return self.log_text().splitlines()

    def url(self, path):
        return f"http://127.0.0.1:{self.port}{path}"

    def get(self, path, timeout=5):
        try:
            with urllib.request.urlopen(self.url(path), timeout=timeout) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()

    def metrics(self):
        status, body = self.get("/metrics")
        check(status == 200, f"/metrics answered {status}")
        return parse_metrics(body)

    def metric(self, name, **labels):
        return self.metrics().get((name, frozenset(labels.items())))

    def wait_ready(self, timeout=20):
        wait_for(lambda: self.get("/readyz")[0] == 200, timeout,
                 f"{self.name} /readyz 200")

    def signal(self, sig):
        self.proc.send_signal(sig)

    def wait_exit(self, timeout):
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise TestFailure(f"{self.name} did not exit within {timeout}s")

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc:
            self.log_file.close()

    def rss_kb(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return None


def run_cli(binary, args, env=None, timeout=60):
    return subprocess.run([binary] + args, capture_output=True, text=True,
                          env=env, timeout=timeout)


def setup_schema(binary, schema, env=None):
    psql(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE', env)
    r = run_cli(binary, ["schema", "install", "--schema", schema], env)
    check(r.returncode == 0, f"schema install failed: {r.stderr}")


def drop_schema(schema, env=None):
    psql(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE', env, check_rc=False)


def register(binary, schema, name, ttl, env=None):
    r = run_cli(binary, ["topic", "register", name, "--headless-ttl", ttl,
                         "--schema", schema], env)
    check(r.returncode == 0, f"topic register {name} failed: {r.stderr}")
    return int(scalar(f"SELECT id FROM \"{schema}\".topic WHERE name = '{name}'",
                      env))


def insert_headless(schema, topic_id, keys, age_sql="interval '1 hour'",
                    env=None, prefix="h"):
    """Inserts `keys` headless rows last touched now() - age."""
    psql(f"""INSERT INTO "{schema}".compaction_head_{topic_id}
             (message_key, created_at, updated_at, idle_since)
             SELECT '{prefix}' || g, now() - {age_sql}, now() - {age_sql},
                    now() - {age_sql}
             FROM generate_series(1, {keys}) g""", env)


def insert_materialized(schema, topic_id, keys, env=None, prefix="m"):
    """Inserts `keys` messages and heads pointing at them, long untouched."""
    psql(f"""WITH m AS (
               INSERT INTO "{schema}".message_{topic_id}
                 (message_key, schema_version, compaction_rank, payload)
               SELECT '{prefix}' || g, 1, 0, '{{"v": 1}}'::jsonb
               FROM generate_series(1, {keys}) g
               RETURNING id, message_key)
             INSERT INTO "{schema}".compaction_head_{topic_id}
               (message_key, head_id, schema_version, compaction_rank,
                created_at, updated_at, idle_since)
             SELECT message_key, id, 1, 0, now() - interval '1 day',
                    now() - interval '1 day', NULL FROM m""", env)


def headless_count(schema, topic_id, env=None):
    return int(scalar(f'SELECT count(*) FROM "{schema}".compaction_head_{topic_id}'
                      ' WHERE head_id IS NULL', env))


def materialized_count(schema, topic_id, env=None):
    return int(scalar(f'SELECT count(*) FROM "{schema}".compaction_head_{topic_id}'
                      ' WHERE head_id IS NOT NULL', env))


def connections(app_name, env=None):
    return int(scalar("SELECT count(*) FROM pg_stat_activity "
                      f"WHERE application_name = '{app_name}'", env))


def as_postgres(cmd):
    if os.geteuid() == 0:
        return ["runuser", "-u", "postgres", "--"] + cmd
    return cmd


class OwnCluster:
    """A throwaway cluster of its own (deploy/local/pg.sh), for tests that
    stop, restart or copy a server; `env` has its PG* variables."""

    def __init__(self, repo):
        self.repo = repo
        self.dir = tempfile.mkdtemp(prefix="cpg.", dir="/tmp")
        subprocess.run(["bash", os.path.join(self.repo, "deploy/local/pg.sh"),
                        "start", self.dir], check=True, capture_output=True)
        self.env = dict(os.environ)
        with open(os.path.join(self.dir, "env")) as f:
            for line in f:
                m = re.match(r"export (\w+)=(.*)", line.strip())
                if m:
                    self.env[m.group(1)] = m.group(2)
        self.port = self.env["PGPORT"]

    def pg_ctl(self, *args):
        subprocess.run(as_postgres([f"{PG_BIN}/pg_ctl", "-D",
                                    f"{self.dir}/data", *args]),
                       check=True, capture_output=True, timeout=60)

    def stop_server(self):
        self.pg_ctl("-m", "fast", "-w", "stop")

    def start_server(self):
        self.pg_ctl("-l", f"{self.dir}/server.log", "-w", "-t", "60", "-o",
                    f"-p {self.port} -k {self.dir}/s "
                    "-c listen_addresses=127.0.0.1 -c fsync=off "
                    "-c max_connections=300", "start")

    def destroy(self):
        subprocess.run(["bash", os.path.join(self.repo, "deploy/local/pg.sh"),
                        "stop", self.dir], capture_output=True)


def parse_test_args(tests):
    """The command line every test file takes: --binary, --repo, TEST."""
    import argparse
    p = argparse.ArgumentParser()
    p.add_argument("--binary", required=True)
    p.add_argument("--repo", required=True)
    p.add_argument("test", choices=sorted(tests))
    return p.parse_args()


def run_one(name, fn, log_lines=60):
    """Runs fn(); prints PASS or FAIL (with the daemons' last log lines).

    Returns the process exit code: 0 on success, 1 on a TestFailure.
    """
    t = time.monotonic()
    passed = False
    try:
        fn()
        passed = True
    except TestFailure as e:
        print(f"FAIL {name}: {e}", flush=True)
        for d in Daemon.instances:
            print(f"--- log of {d.name} (last {log_lines} lines)")
            print("\n".join(d.log_lines()[-log_lines:]), flush=True)
        return 1
    finally:
        # A failed test may leave a daemon running.
        for d in Daemon.instances:
            d.stop()
        if passed:
            remove_scratch_dirs()
        elif _SCRATCH_DIRS:
            print(f"--- whole logs kept in {' '.join(_SCRATCH_DIRS)}",
                  flush=True)
    print(f"PASS {name} ({time.monotonic() - t:.1f}s)", flush=True)
    return 0


def locked_topic(binary, schema):
    """Installs `schema` with one topic, "slow", whose head table a
    LockHolder (returned; kill it when done) holds ACCESS EXCLUSIVE: every
    query of its statistics waits."""
    setup_schema(binary, schema)
    holder = LockHolder()
    tid = register(binary, schema, "slow", "1h")
    holder.lock(f'LOCK TABLE "{schema}".compaction_head_{tid} '
                "IN ACCESS EXCLUSIVE MODE")
    return holder


def check_stats_cancelled(binary, args, label, env=None):
    """Runs `compactiond stats` with `args` while its head table is locked:
    it must fail on a statement timeout well within 10 s."""
    t = time.monotonic()
    r = run_cli(binary, ["stats", *args], env=env, timeout=30)
    took = time.monotonic() - t
    log(f"FIGURE {label}: exit {r.returncode} after {took:.2f}s")
    check(r.returncode != 0, f"stats returned under the lock: {r.stdout}")
    check("statement timeout" in r.stderr or "cancel" in r.stderr,
          f"not a statement timeout: {r.stderr}")
    check(took < 10, f"took {took:.1f}s with a short stats-timeout")
