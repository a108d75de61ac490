#!/usr/bin/env python3
"""Hostile-client tests of compactiond's HTTP endpoint (issue 11).

  http_test.py --binary PATH --repo ROOT TEST

idle: silent and slow clients are cut off at the first-request deadline, a
kept-alive connection is not, and one peer's surplus connections evict that
peer's oldest idle ones while a probe from the same address still gets in.
evict: with one peer's 64 sessions all busy, its next connection closes
the session stuck writing to a client that does not read, never one that
waits for its scrape turn.
global: 600 peers of one connection each hold the daemon at its session
cap; a probe from the lowest address still gets in.
stalled: eight clients that never read their /metrics answers hold every
writer slot; a scrape from another address is still served in full.
load: at 1,000 topics, 200 idle connections plus 60 looping /metrics
scrapers, then 64 clients that pipeline /metrics and never read; /healthz
answers fast throughout and the daemon's RSS stays bounded.

Every client comes from 127.0.0.1, like a kubelet sharing a node with a
misbehaving scraper: the daemon's per-peer cap must not starve the probes.
Load runs in a child process so that the GIL of its threads does not delay
the probes' own timing. Prints measured figures as "FIGURE ...".
"""

import http.client
import multiprocessing
import os
import select
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (Daemon, check, drop_schema, log,  # noqa: E402
                     run_cli, setup_schema, wait_for)
from harness import parse_test_args, run_one  # noqa: E402

ARGS = None
PROBE = b"GET /healthz HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"
SCRAPE = b"GET /metrics HTTP/1.1\r\nHost: t\r\n\r\n"
FIRST_REQUEST_DEADLINE = 5  # daemon/http.cpp kFirstRequestTimeout
PER_PEER_CAP = 64           # daemon/http.cpp kMaxSessionsPerPeer
MAX_SCRAPE_WAIT = 2         # daemon/http.cpp kMaxScrapeWait
RSS_LIMIT_KB = 64 * 1024


def schema_name(test):
    return f"d_http_{test}_{os.getpid()}"


def run_args(schema, app, *extra):
    return ["run", "--schema", schema, "--listen", "127.0.0.1:0",
            "--application-name", app, *extra]


def probe(port, timeout=2.0, pause=0.0):
    """GET /healthz on a new connection, as a kubelet does: (status, s).
    `pause`: seconds between connecting and sending the request."""
    start = time.monotonic()
    try:
        with socket.create_connection(("127.0.0.1", port), timeout) as s:
            s.settimeout(max(0.01, timeout - (time.monotonic() - start)))
            time.sleep(pause)
            s.sendall(PROBE)
            data = b""
            while True:
                chunk = s.recv(4096)
                if not chunk:
                    break
                data += chunk
        status = int(data.split(b" ", 2)[1]) if data else 0
    except OSError:
        status = 0
    return status, time.monotonic() - start


# First attempts of a phase's probes that may be closed unanswered: the
# race is rare (1 probe of 80 in one run of some 20); more is a regression.
MAX_PROBE_RETRIES = 2


def probe_as_kubelet(port):
    """probe(), once more when the first connection was closed unanswered:
    (status, s, retried). A flood of new connections can close a probe's
    connection before its request is read (doc/security.md); a kubelet
    counts that as one failed probe of its failureThreshold (3) and its
    next one gets through. A retry that fails too is a failed probe."""
    status, took = probe(port)
    if status != 0:
        return status, took, False
    again, took_again = probe(port)
    return again, took + took_again, True


def is_closed(sock, wait=0.0):
    """True once the peer closed `sock` (EOF or reset); never consumes data."""
    readable, _, _ = select.select([sock], [], [], wait)
    if not readable:
        return False
    try:
        return sock.recv(1, socket.MSG_PEEK) == b""
    except OSError:
        return True


def wait_closed(sock, timeout):
    """Seconds until the peer closed `sock`, or None after `timeout`."""
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        if is_closed(sock, 0.05):
            return time.monotonic() - start
    return None


ESTABLISHED = "01"  # a socket's state in /proc/net/tcp


def daemon_sockets(port):
    """The daemon's side of each connection to `port`, by the client's port:
    (state, bytes queued to send, bytes received and not yet read), from
    /proc/net/tcp (the daemon listens on IPv4)."""
    sockets = {}
    with open("/proc/net/tcp") as f:
        next(f)
        for line in f:
            fields = line.split()
            if int(fields[1].split(":")[1], 16) != port:
                continue
            tx, rx = (int(n, 16) for n in fields[4].split(":"))
            remote = int(fields[2].split(":")[1], 16)
            # A live connection wins over an old one on the same client port.
            if sockets.get(remote, ("",))[0] != ESTABLISHED:
                sockets[remote] = (fields[3], tx, rx)
    return sockets


def daemon_side(port, client):
    """The daemon's side of `client`'s connection (see daemon_sockets), or
    None once it is gone."""
    return daemon_sockets(port).get(client.getsockname()[1])


def closed_by_daemon(port, client):
    """True once the daemon closed its side of `client`'s connection. Unlike
    is_closed it holds with unread responses in the client's buffer."""
    side = daemon_side(port, client)
    return side is None or side[0] != ESTABLISHED


def daemon_connections(port):
    """Established connections on the daemon's port (its side)."""
    return sum(1 for state, _, _ in daemon_sockets(port).values()
               if state == ESTABLISHED)


def percentile(values, p):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


# --- load generators (run in a child process) ----------------------------------

def hold_idle(port, count, stop, reopened):
    """Keeps `count` silent connections open, topping up once a second."""
    socks = []
    while not stop.is_set():
        alive = []
        for s in socks:
            if is_closed(s):
                s.close()
                with reopened.get_lock():
                    reopened.value += 1
            else:
                alive.append(s)
        socks = alive
        while len(socks) < count and not stop.is_set():
            try:
                socks.append(socket.create_connection(("127.0.0.1", port), 2))
            except OSError:
                break
        stop.wait(1.0)
    for s in socks:
        s.close()


def scrape_loop(port, stop, counts):
    """GET /metrics over keep-alive as fast as the answers come."""
    conn = None
    while not stop.is_set():
        try:
            if conn is None:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=15)
            conn.request("GET", "/metrics")
            r = conn.getresponse()
            r.read()
            index = {200: 0, 503: 1}.get(r.status, 2)
        except (OSError, http.client.HTTPException):
            index = 3
            if conn is not None:
                conn.close()
            conn = None
        with counts.get_lock():
            counts[index] += 1
    if conn is not None:
        conn.close()


def pipeline_never_read(port, stop, requests, resets):
    """Sends `requests` pipelined scrapes, never reads, resends when cut."""
    while not stop.is_set():
        try:
            with socket.create_connection(("127.0.0.1", port), 2) as s:
                s.settimeout(2)
                s.sendall(SCRAPE * requests)
                while not stop.wait(0.5):
                    s.sendall(SCRAPE)  # fails once the daemon gave up on us
        except OSError:
            with resets.get_lock():
                resets.value += 1
            stop.wait(0.1)


def run_load(kind, port, stop, shared):
    threads = []
    if kind == "idle_and_scrapers":
        threads.append(threading.Thread(
            target=hold_idle, args=(port, 200, stop, shared["reopened"])))
        threads += [threading.Thread(target=scrape_loop,
                                     args=(port, stop, shared["counts"]))
                    for _ in range(60)]
    else:
        threads += [threading.Thread(target=pipeline_never_read,
                                     args=(port, stop, 2000, shared["resets"]))
                    for _ in range(64)]
    for t in threads:
        t.daemon = True
        t.start()
    stop.wait()
    # Threads blocked on a socket end with the process (daemon threads).
    deadline = time.monotonic() + 5
    for t in threads:
        t.join(timeout=max(0, deadline - time.monotonic()))


class Load:
    """A load generator in its own process."""

    def __init__(self, kind, port):
        ctx = multiprocessing.get_context("fork")
        self.stop_event = ctx.Event()
        self.shared = {"reopened": ctx.Value("l", 0),
                       "counts": ctx.Array("l", 4),  # 200, 503, other, error
                       "resets": ctx.Value("l", 0)}
        self.proc = ctx.Process(target=run_load, args=(
            kind, port, self.stop_event, self.shared))

    def __enter__(self):
        self.proc.start()
        return self

    def __exit__(self, *exc):
        self.stop_event.set()
        self.proc.join(timeout=30)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join()


# --- idle: deadlines and the per-peer cap --------------------------------------

def test_idle():
    schema = schema_name("idle")
    setup_schema(ARGS.binary, schema)
    daemon = None
    try:
        daemon = Daemon(ARGS.binary, run_args(schema, f"cd_http_idle_{os.getpid()}"),
                        name="http-idle").start()
        port = daemon.port
        # A silent connection, a slowloris dribbling one header line a
        # second, and a kept-alive connection that made one request.
        silent = socket.create_connection(("127.0.0.1", port))
        slow = socket.create_connection(("127.0.0.1", port))
        slow.sendall(b"GET /healthz HTTP/1.1\r\n")
        kept = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        kept.request("GET", "/healthz")
        check(kept.getresponse().read() == b"ok\n", "keep-alive request")
        start = time.monotonic()
        slow_closed = None
        silent_closed = None
        line = 0
        while time.monotonic() - start < FIRST_REQUEST_DEADLINE + 5:
            if slow_closed is None:
                if is_closed(slow):
                    slow_closed = time.monotonic() - start
                else:
                    try:
                        slow.sendall(f"X-Drip-{line}: 1\r\n".encode())
                        line += 1
                    except OSError:
                        slow_closed = time.monotonic() - start
            if silent_closed is None and is_closed(silent):
                silent_closed = time.monotonic() - start
            if slow_closed is not None and silent_closed is not None:
                break
            time.sleep(0.5 if slow_closed is None else 0.05)
        elapsed = time.monotonic() - start
        # Past the first-request deadline, the kept-alive connection still
        # serves: only the keep-alive idle timeout applies to it.
        try:
            kept.request("GET", "/healthz")
            kept_status = kept.getresponse().status
        except (OSError, http.client.HTTPException) as e:
            kept_status = repr(e)
        check(kept_status == 200, f"kept-alive connection after {elapsed:.1f}s"
              f" idle: {kept_status}")
        kept.close()
        print(f"FIGURE http_idle silent_closed_after_s={silent_closed}"
              f" slowloris_closed_after_s={slow_closed}"
              f" keepalive_alive_after_s={elapsed:.1f}", flush=True)
        for what, t in (("silent", silent_closed), ("slowloris", slow_closed)):
            check(t is not None, f"{what} connection still open after "
                  f"{FIRST_REQUEST_DEADLINE + 5}s")
            check(FIRST_REQUEST_DEADLINE - 1.5 <= t <= FIRST_REQUEST_DEADLINE + 3,
                  f"{what} connection closed after {t:.1f}s, expected about "
                  f"{FIRST_REQUEST_DEADLINE}s")
        silent.close()
        slow.close()

        # The per-peer cap: 100 idle connections from one address. The
        # daemon accepts in connect order, so its evictions (oldest idle
        # first) close exactly the oldest ones; a probe from the same
        # address, arriving last, still gets in.
        socks = [socket.create_connection(("127.0.0.1", port))
                 for _ in range(100)]
        status, took = probe(port)
        check(status == 200, f"probe with 100 idle connections: {status}")
        closed = [is_closed(s, 0.2 if i == 0 else 0.0)
                  for i, s in enumerate(socks)]
        open_idx = [i for i, c in enumerate(closed) if not c]
        closed_idx = [i for i, c in enumerate(closed) if c]
        print(f"FIGURE http_idle per_peer_open={len(open_idx)}"
              f" evicted={len(closed_idx)} probe_s={took:.3f}", flush=True)
        check(len(open_idx) <= PER_PEER_CAP,
              f"{len(open_idx)} idle connections open, cap {PER_PEER_CAP}")
        check(len(open_idx) >= PER_PEER_CAP - 2,
              f"only {len(open_idx)} of the newest connections kept")
        check(not closed_idx or max(closed_idx) < min(open_idx),
              "evicted connections were not the oldest idle ones")
        for s in socks:
            s.close()
        check(daemon.proc.poll() is None, "daemon exited")
    finally:
        if daemon:
            daemon.stop()
        drop_schema(schema)


# --- evict: which of a peer's busy sessions its next connection closes ---------

HEALTHZ_KEEP = b"GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n"


def stuck_writer(port, request=HEALTHZ_KEEP, count=4000):
    """A connection that pipelines `count` copies of `request` and never
    reads, with a small segment size and receive buffer, so that the
    daemon's socket buffers fill (after a few hundred /healthz responses,
    or within one large /metrics body) and its write stalls."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_MAXSEG, 536)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect(("127.0.0.1", port))
    s.settimeout(0.5)
    try:
        s.sendall(request * count)
    except socket.timeout:
        pass  # the daemon stopped reading: it is stuck already
    return s


def wait_stalled(port, sock, timeout=20):
    """The daemon's send queue toward `sock` once it stopped moving."""
    last = None
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        side = daemon_side(port, sock)
        queued = side[1] if side else None
        if queued and queued == last:
            return queued
        last = queued
        time.sleep(0.3)
    raise AssertionError(f"the writer never stalled (send queue {last})")


def waiting_scraper(port):
    """Five pipelined /metrics, never read: once the peer's scrape turns are
    taken for the next two seconds, each waits that long (then is served or
    gets 503), so the session is busy for six seconds or more."""
    s = socket.create_connection(("127.0.0.1", port), 2)
    s.sendall(SCRAPE * 5)
    return s


def all_read(port, socks):
    """True once the daemon has read everything each of `socks` sent (its
    side's receive queue is empty): a session whose request was read is no
    longer idle."""
    sockets = daemon_sockets(port)
    return all(sockets.get(s.getsockname()[1], ("", 0, 0))[2] == 0
               for s in socks)


def test_evict():
    schema = schema_name("evict")
    setup_schema(ARGS.binary, schema)
    daemon = None
    socks = []
    try:
        daemon = Daemon(ARGS.binary, run_args(schema, f"cd_http_evict_{os.getpid()}"),
                        name="http-evict").start()
        port = daemon.port
        # Twenty scrapes take the turns of the next two seconds, so every
        # scrape after them waits about two seconds: with five requests in
        # its pipeline a waiter is busy for six seconds or more. The writer
        # stalls after the first twenty started waiting, so it is neither
        # the oldest busy session nor the newest.
        first = time.monotonic()
        waiters = []
        for _ in range(20):
            waiters.append(waiting_scraper(port))
            socks.append(waiters[-1])
        writer = stuck_writer(port)
        socks.append(writer)
        queued = wait_stalled(port, writer)
        while len(waiters) < PER_PEER_CAP - 1:
            waiters.append(waiting_scraper(port))
            socks.append(waiters[-1])
        wait_for(lambda: daemon_connections(port) == PER_PEER_CAP, 5,
                 f"{PER_PEER_CAP} connections established")
        # Accepted is not enough: a session is idle (first to go) until the
        # daemon has read its request.
        wait_for(lambda: all_read(port, waiters), 5,
                 "the daemon read every waiter's requests")
        start = time.monotonic()
        newcomer = socket.create_connection(("127.0.0.1", port), 2)
        socks.append(newcomer)
        writer_closed = None
        while time.monotonic() - start < 1.5 and writer_closed is None:
            if closed_by_daemon(port, writer):
                writer_closed = time.monotonic() - start
            time.sleep(0.02)
        waiters_closed = [i for i, s in enumerate(waiters)
                          if closed_by_daemon(port, s)]
        took = time.monotonic() - start
        print(f"FIGURE http_evict writer_send_queue_b={queued}"
              f" newcomer_after_s={start - first:.2f}"
              f" writer_closed_after_s={writer_closed}"
              f" waiters_closed={waiters_closed} checked_within_s={took:.2f}",
              flush=True)
        check(queued < 4000 * 100 // 2,
              f"{queued} bytes queued: the writer's responses all fit")
        check(start - first < 2 * MAX_SCRAPE_WAIT,
              f"the newcomer came {start - first:.2f}s after the first "
              f"waiter, when waiters may be idle again")
        check(writer_closed is not None,
              "the session stuck writing to a non-reading client stayed open")
        check(not waiters_closed,
              f"sessions waiting for their scrape turn were closed: "
              f"{waiters_closed}")
        check(not closed_by_daemon(port, newcomer),
              "the new connection was closed")
        check(daemon.proc.poll() is None, "daemon exited")
    finally:
        for s in socks:
            s.close()
        if daemon:
            daemon.stop()
        drop_schema(schema)


# --- global: 600 addresses at the session cap, a probe still gets in -------

def hold_one_each(port, addresses, stop):
    """One idle connection from each of `addresses`, reopened 0.3 s after
    the daemon closes it (its first-request deadline, or an eviction): the
    daemon stays at its session cap, evicting sessions all the time."""
    held = {}
    reopen_at = {}
    while not stop.is_set():
        now = time.monotonic()
        for a in addresses:
            s = held.get(a)
            if s is not None:
                readable, _, _ = select.select([s], [], [], 0)
                if not readable:
                    continue
                s.close()
                del held[a]
                reopen_at[a] = now + 0.3
            if reopen_at.get(a, 0) > now:
                continue
            try:
                s = socket.socket()
                s.bind((a, 0))
                s.connect(("127.0.0.1", port))
                held[a] = s
            except OSError:
                reopen_at[a] = now + 0.3
        stop.wait(0.01)
    for s in held.values():
        s.close()


def test_global():
    """600 peers, one idle connection each, keep the daemon at its global
    session cap (512) and reconnect as they are closed. Probes from
    127.0.0.1, the lowest address, all get in: a tie between peers of one
    session each used to close the lowest address's session, the probe's;
    now the session idle longest goes. (A flood that reconnects at once
    keeps every session young; no order of eviction tells a probe from it
    then.)"""
    schema = schema_name("global")
    setup_schema(ARGS.binary, schema)
    daemon = None
    stop = multiprocessing.get_context("fork").Event()
    holders = []
    try:
        daemon = Daemon(ARGS.binary, run_args(
            schema, f"cd_http_global_{os.getpid()}"), name="http-global").start()
        port = daemon.port
        addresses = [f"127.0.{2 + i // 250}.{1 + i % 250}" for i in range(600)]
        ctx = multiprocessing.get_context("fork")
        holders = [ctx.Process(target=hold_one_each,
                               args=(port, addresses[k::2], stop))
                   for k in range(2)]
        for h in holders:
            h.start()
        wait_for(lambda: daemon_connections(port) >= 500, 20,
                 "the daemon near its session cap")
        time.sleep(6)  # past the first-request deadline: they churn now
        # Each probe sends its request 50 ms after connecting (a busy
        # kubelet), so that the churn has time to reach its session.
        statuses = []
        for _ in range(40):
            statuses.append(probe(port, pause=0.05)[0])
            time.sleep(0.1)
        print(f"FIGURE http_global peers=600 evictions_logged="
              f"{daemon.log_text().count('sessions evicted')}"
              f" connections={daemon_connections(port)}"
              f" probes={len(statuses)} ok={statuses.count(200)}", flush=True)
        check(statuses.count(200) == len(statuses),
              f"probes answered {statuses}")
        check(daemon.proc.poll() is None, "daemon exited")
    finally:
        stop.set()
        for h in holders:
            h.join(timeout=10)
            if h.is_alive():
                h.kill()
        if daemon:
            daemon.stop()
        drop_schema(schema)


# --- stalled: clients that never read do not hold /metrics at 503 ------------

CACHED_WRITERS = 8   # daemon/http.cpp kMaxCachedWriters
WRITE_TIMEOUT = 10   # daemon/http.cpp kWriteTimeout


def scrape_from(address, port, timeout=5):
    """GET /metrics from `address`: (status, body bytes, reason)."""
    s = socket.socket()
    try:
        s.bind((address, 0))
        s.settimeout(timeout)
        s.connect(("127.0.0.1", port))
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
        c.sock = s
        c.request("GET", "/metrics")
        r = c.getresponse()
        body = r.read()
        return r.status, len(body), body[:60]
    except (OSError, http.client.HTTPException) as e:
        return 0, 0, repr(e)
    finally:
        s.close()


def test_stalled():
    """Eight clients take every writer slot of /metrics and never read. A
    scrape from another address still gets the whole body once their writes
    have moved nothing for a second, well before their write deadline, and
    the stalled clients are not cut off for it: their writes go on."""
    schema = schema_name("stalled")
    setup_schema(ARGS.binary, schema)
    daemon = None
    socks = []
    try:
        register_topics(schema, 1000)  # a body of some 400 kB: writes stall
        daemon = Daemon(ARGS.binary, run_args(
            schema, f"cd_http_stalled_{os.getpid()}"), name="http-stalled").start()
        port = daemon.port
        wait_for(lambda: daemon.metric("compaction_topics") == 1000, 60,
                 "1000 topics loaded")
        first = time.monotonic()
        for _ in range(CACHED_WRITERS):
            socks.append(stuck_writer(port, SCRAPE, 1))  # stalls mid-body
        queued = [wait_stalled(port, s) for s in socks]
        stalled_at = time.monotonic()
        results = []
        while time.monotonic() - first < WRITE_TIMEOUT - 3:
            results.append(scrape_from("127.0.0.2", port))
            if results[-1][0] == 200:
                break
            time.sleep(0.25)
        took = time.monotonic() - first
        cut = [i for i, s in enumerate(socks) if closed_by_daemon(port, s)]
        print(f"FIGURE http_stalled writers={len(socks)}"
              f" send_queues_b={queued}"
              f" stalled_after_s={stalled_at - first:.2f}"
              f" scrapes={[r[0] for r in results]} ok_after_s={took:.2f}"
              f" stalled_cut={cut}", flush=True)
        check(results and results[-1][0] == 200,
              f"/metrics while {len(socks)} writes stall: {results[-1:]}")
        body = results[-1][1]
        check(body > 100_000, f"body of {body} bytes")
        # The stalled writes were mid-body, so they held their slots.
        check(max(queued) < body // 2,
              f"send queues {queued} against a body of {body} bytes")
        check(not cut, f"stalled writers closed early: {cut}")
        check(daemon.proc.poll() is None, "daemon exited")
    finally:
        for s in socks:
            s.close()
        if daemon:
            daemon.stop()
        drop_schema(schema)


# --- load: 1,000 topics, idle + scrapers, then non-reading pipeliners ----------

def register_topics(schema, count):
    start = time.monotonic()
    names = [f"t{i:04d}" for i in range(count)]
    r = run_cli(ARGS.binary, ["topic", "register", *names, "--headless-ttl",
                              "1h", "--schema", schema], timeout=150)
    check(r.returncode == 0, f"registration failed: {r.stderr[-500:]}")
    log(f"registered {count} topics in {time.monotonic() - start:.1f}s")


def idle_and_scrapers(daemon):
    """(a): returns the probe latencies under 200 idle + 60 scrapers."""
    with Load("idle_and_scrapers", daemon.port) as load:
        counts = load.shared["counts"]
        wait_for(lambda: counts[0] >= 20, 30, "scrapers under way")
        latencies, statuses, retries = [], [], 0
        for _ in range(50):
            status, took, retried = probe_as_kubelet(daemon.port)
            statuses.append(status)
            latencies.append(took)
            retries += retried
            time.sleep(0.1)
        rss = daemon.rss_kb()
        scrapes = list(counts)
        reopened = load.shared["reopened"].value
    p50, p95 = percentile(latencies, 50), percentile(latencies, 95)
    print(f"FIGURE http_load idle=200 scrapers=60 probes={len(latencies)}"
          f" ok={statuses.count(200)} retried={retries}"
          f" p50_ms={p50 * 1000:.1f}"
          f" p95_ms={p95 * 1000:.1f} max_ms={max(latencies) * 1000:.1f}"
          f" scrapes_200={scrapes[0]} scrapes_503={scrapes[1]}"
          f" scrape_errors={scrapes[2] + scrapes[3]}"
          f" idle_reopened={reopened} vmrss_kb={rss}", flush=True)
    check(statuses.count(200) == len(statuses),
          f"probes answered {statuses}")
    check(retries <= MAX_PROBE_RETRIES, f"{retries} probes closed unanswered")
    check(max(latencies) < 1.0, f"slowest probe {max(latencies):.3f}s")
    check(p95 < 0.1, f"/healthz p95 {p95 * 1000:.1f} ms, limit 100 ms")
    check(scrapes[0] > 0, "no scrape succeeded")


def under_asan(daemon):
    """True when the daemon binary runs with AddressSanitizer's runtime."""
    with open(f"/proc/{daemon.proc.pid}/maps") as f:
        return "libasan" in f.read()


def scrape_once(port):
    """One GET /metrics on a new connection: [status or the error's repr,
    seconds]."""
    start = time.monotonic()
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        c.request("GET", "/metrics")
        status = c.getresponse().status
        c.close()
        return [status, time.monotonic() - start]
    except (OSError, http.client.HTTPException) as e:
        return [repr(e), time.monotonic() - start]


def pipeliners(daemon):
    """(b): RSS and /healthz under 64 non-reading pipelining clients."""
    base = daemon.rss_kb()
    rss, statuses, latencies, scrape, retries = [], [], [], [], 0
    with Load("pipeline", daemon.port) as load:
        end = time.monotonic() + 20  # two write deadlines: clients resend
        while time.monotonic() < end:
            rss.append(daemon.rss_kb())
            status, took, retried = probe_as_kubelet(daemon.port)
            statuses.append(status)
            latencies.append(took)
            retries += retried
            time.sleep(0.25)
        # A scraper is answered (200, or 503 once its address has used up
        # its turns), never left hanging. It shares 127.0.0.1 with the 64
        # clients that reconnect as fast as they are cut, so, like a probe,
        # its connection may be the one closed to admit theirs
        # (doc/security.md): once, and the next scrape is answered.
        scrape, closed_first = scrape_once(daemon.port), None
        if not isinstance(scrape[0], int):
            closed_first = scrape[0]
            scrape = scrape_once(daemon.port)
        resets = load.shared["resets"].value
    print(f"FIGURE http_load pipeliners=64 vmrss_base_kb={base}"
          f" vmrss_max_kb={max(rss)} limit_kb={RSS_LIMIT_KB}"
          f" probes={len(statuses)} ok={statuses.count(200)} retried={retries}"
          f" probe_p95_ms={percentile(latencies, 95) * 1000:.1f}"
          f" probe_max_ms={max(latencies) * 1000:.1f}"
          f" scrape={scrape[0]} scrape_s={scrape[1]:.3f}"
          f" scrape_closed_first={closed_first}"
          f" client_reconnects={resets}", flush=True)
    if under_asan(daemon):
        # AddressSanitizer keeps freed memory in its quarantine (256 MB by
        # default) and shadows every byte, so RSS says nothing about the
        # daemon's own bound there; the plain build checks it.
        log(f"RSS bound not checked under AddressSanitizer (max {max(rss)} kB)")
    else:
        check(max(rss) < RSS_LIMIT_KB, f"VmRSS reached {max(rss)} kB")
    check(statuses.count(200) == len(statuses), f"probes answered {statuses}")
    check(retries <= MAX_PROBE_RETRIES, f"{retries} probes closed unanswered")
    check(max(latencies) < 1.0, f"slowest probe {max(latencies):.3f}s")
    check(scrape[0] in (200, 503) and scrape[1] < MAX_SCRAPE_WAIT + 1,
          f"scrape under pipelining: {scrape}")
    # Once the clients are gone the writer slots are free again.
    wait_for(lambda: daemon.get("/metrics", timeout=5)[0] == 200, 15,
             "/metrics 200 after the pipelining clients left")


def test_load():
    schema = schema_name("load")
    setup_schema(ARGS.binary, schema)
    daemon = None
    try:
        register_topics(schema, 1000)
        daemon = Daemon(ARGS.binary, run_args(
            schema, f"cd_http_load_{os.getpid()}"), name="http-load").start()
        wait_for(lambda: daemon.metric("compaction_topics") == 1000, 60,
                 "1000 topics loaded")
        idle_and_scrapers(daemon)
        pipeliners(daemon)
        check(daemon.proc.poll() is None, "daemon exited")
    finally:
        if daemon:
            daemon.stop()
        drop_schema(schema)


TESTS = {"idle": test_idle, "evict": test_evict, "global": test_global,
         "stalled": test_stalled, "load": test_load}


def main():
    global ARGS
    ARGS = parse_test_args(TESTS)
    return run_one(f"http_{ARGS.test}", TESTS[ARGS.test], log_lines=40)


if __name__ == "__main__":
    sys.exit(main())
