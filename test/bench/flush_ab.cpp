// The commit check's flush on raw libpq, without the library: the same
// transaction [BEGIN; INSERT .. RETURNING; COMMIT] as one pipeline with one
// Sync, with and without a Flush request before the COMMIT, in alternating
// blocks on one connection (RESULTS.md, runs X1 and X2). With the Flush the
// server sends the INSERT's result before it commits, in a packet of its own,
// which is what the library's commit check needs (doc/poolers-and-failover.md).
// Not part of the build:
//
//   g++ -std=c++20 -O2 -I"$(pg_config --includedir)" test/bench/flush_ab.cpp
//     -lpq -o /tmp/flush_ab              (one command line)
//   /tmp/flush_ab TRANSACTIONS BLOCKS     # the PG* variables of a server
//
// It creates (and drops first) a table `flush_ab` in the connection's
// database. Per block and form one line: tx/s, p50 in us, the client's CPU
// and context switches per transaction (getrusage), the backend's on-CPU
// time and timeslices per transaction (/proc/PID/schedstat: the server must
// run on this machine, in this PID namespace).
#include <libpq-fe.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

namespace {

struct ClientTime {
  double cpu_seconds = 0;
  long context_switches = 0;
};

ClientTime ReadClient() {
  rusage r{};
  getrusage(RUSAGE_SELF, &r);
  return ClientTime{r.ru_utime.tv_sec + r.ru_stime.tv_sec +
                        (r.ru_utime.tv_usec + r.ru_stime.tv_usec) / 1e6,
                    r.ru_nvcsw + r.ru_nivcsw};
}

struct BackendTime {
  double on_cpu_ns = 0;
  long timeslices = 0;
};

BackendTime ReadBackend(int pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/schedstat");
  BackendTime t;
  double waited_ns = 0;
  if (!(f >> t.on_cpu_ns >> waited_ns >> t.timeslices)) {
    std::fprintf(stderr,
                 "cannot read /proc/%d/schedstat: the server must run on "
                 "this machine\n",
                 pid);
    std::exit(1);
  }
  return t;
}

void Require(PGconn* c, bool ok) {
  if (ok) return;
  std::fprintf(stderr, "%s\n", PQerrorMessage(c));
  std::exit(1);
}

void RequireCommandOk(PGconn* c, PGresult* r) {
  const bool ok = r != nullptr && PQresultStatus(r) == PGRES_COMMAND_OK;
  PQclear(r);
  Require(c, ok);
}

// One transaction, one round trip: BEGIN, the insert, [Flush,] COMMIT, Sync.
void OneTransaction(PGconn* c, bool flush) {
  const char* value[1] = {"payload"};
  Require(c, PQsendQueryPrepared(c, "begin", 0, nullptr, nullptr, nullptr, 0));
  Require(c, PQsendQueryPrepared(c, "insert", 1, value, nullptr, nullptr, 0));
  if (flush) Require(c, PQsendFlushRequest(c));
  Require(c, PQsendQueryPrepared(c, "commit", 0, nullptr, nullptr, nullptr, 0));
  Require(c, PQpipelineSync(c));
  for (int statement = 0; statement < 3; ++statement) {
    PGresult* r = PQgetResult(c);
    const ExecStatusType s = r ? PQresultStatus(r) : PGRES_FATAL_ERROR;
    Require(c, s == PGRES_COMMAND_OK || s == PGRES_TUPLES_OK);
    PQclear(r);
    Require(c, PQgetResult(c) == nullptr);  // the statement's end
  }
  PGresult* sync = PQgetResult(c);
  Require(c, sync && PQresultStatus(sync) == PGRES_PIPELINE_SYNC);
  PQclear(sync);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s TRANSACTIONS BLOCKS\n", argv[0]);
    return 2;
  }
  const int n = std::atoi(argv[1]), blocks = std::atoi(argv[2]);
  if (n < 1 || blocks < 1) {
    std::fprintf(stderr, "TRANSACTIONS and BLOCKS must be positive\n");
    return 2;
  }
  PGconn* c = PQconnectdb("");
  Require(c, PQstatus(c) == CONNECTION_OK);
  RequireCommandOk(
      c, PQexec(c,
                "SET client_min_messages = warning; "
                "DROP TABLE IF EXISTS flush_ab; "
                "CREATE TABLE flush_ab (id bigint GENERATED ALWAYS AS "
                "IDENTITY PRIMARY KEY, v text, created_at timestamptz "
                "NOT NULL DEFAULT statement_timestamp())"));
  RequireCommandOk(c, PQprepare(c, "begin", "BEGIN", 0, nullptr));
  RequireCommandOk(
      c,
      PQprepare(c, "insert",
                "INSERT INTO flush_ab (v) VALUES ($1) RETURNING id, created_at",
                1, nullptr));
  RequireCommandOk(c, PQprepare(c, "commit", "COMMIT", 0, nullptr));
  const int backend = PQbackendPID(c);
  Require(c, PQenterPipelineMode(c));
  for (int block = 0; block < blocks; ++block) {
    for (int turn = 0; turn < 2; ++turn) {
      const bool flush = (block + turn) % 2 == 1;  // alternate which goes first
      const BackendTime s0 = ReadBackend(backend);
      const ClientTime c0 = ReadClient();
      const auto t0 = std::chrono::steady_clock::now();
      std::vector<double> latency_us;
      latency_us.reserve(n);
      for (int i = 0; i < n; ++i) {
        const auto a = std::chrono::steady_clock::now();
        OneTransaction(c, flush);
        latency_us.push_back(std::chrono::duration<double, std::micro>(
                                 std::chrono::steady_clock::now() - a)
                                 .count());
      }
      const double wall =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
              .count();
      const ClientTime c1 = ReadClient();
      const BackendTime s1 = ReadBackend(backend);
      std::sort(latency_us.begin(), latency_us.end());
      std::printf(
          "%d %-7s tx/s %.0f p50 %.0f us client %.1f us/tx client csw/tx "
          "%.2f server %.1f us/tx server slices/tx %.2f\n",
          block, flush ? "flush" : "noflush", n / wall, latency_us[n / 2],
          1e6 * (c1.cpu_seconds - c0.cpu_seconds) / n,
          static_cast<double>(c1.context_switches - c0.context_switches) / n,
          (s1.on_cpu_ns - s0.on_cpu_ns) / 1e3 / n,
          static_cast<double>(s1.timeslices - s0.timeslices) / n);
      std::fflush(stdout);
    }
  }
  PQfinish(c);
  return 0;
}
