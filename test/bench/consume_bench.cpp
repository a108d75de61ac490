// consume_bench: the consumer benchmarks of test/bench/RESULTS.md
// ("Consumers"), side by side in one run:
//   pgq      consumer throughput, batch 500, against PgQ (same payloads,
//            same batch size, the same backlog loaded before each round)
//   poll     Poll cost at --big messages (10,000,000), catching up from the
//            start and in the tail, with and without a transaction held
//            open for the whole variant
//   produce  what the consumption columns and index cost a produce: the
//            same build's topic with and without them
//   wait     Wait's wake-up latency and what an idle waiter costs produces
//   waiters  what N idle waiters (--waiters 1,8,32) cost produces: each
//            quick probe reads the whole pg_locks
//
//   consume_bench [--only pgq,poll,produce,wait] [--rounds N] [--messages N]
//                 [--big N] [--catchup-batches N] [--tail-seconds S]
//                 [--seconds S] [--cells N] [--threads N] [--wakes N]
//                 [--waiters N,N,...]
//
// Connects through the PG* environment; needs the pgq extension for "pgq".
// Run it through test/bench/consume_bench.sh, which starts a throwaway
// cluster. Prints markdown; no timing assertions.
#include <libpq-fe.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "compaction/compaction.hpp"

using Clock = std::chrono::steady_clock;
using compaction::Client;
using compaction::ClientOptions;
using compaction::ConsumerOptions;
using compaction::ProduceOptions;
using compaction::TopicConfig;
using compaction::Tx;
using namespace std::chrono_literals;

namespace {

struct Counter {
  static constexpr int kSchemaVersion = 1;
  std::int64_t value = 0;
};
void to_json(nlohmann::json& j, const Counter& c) { j = {{"value", c.value}}; }
void from_json(const nlohmann::json& j, Counter& c) {
  j.at("value").get_to(c.value);
}

const std::string kSchema = "cbench";

struct Options {
  std::set<std::string> only;
  int rounds = 3;
  long messages = 100000;  // pgq: backlog per round
  long big = 10000000;     // poll: log size
  int catchup_batches = 2000;
  double tail_seconds = 15;
  double seconds = 1;  // produce cells
  int cells = 20;      // produce cells per variant, alternated
  int threads = 2;
  int wakes = 100;
  std::vector<int> waiters = {1, 8, 32};  // "waiters": idle waiter counts
};

struct ResClear {
  void operator()(PGresult* r) const { PQclear(r); }
};
using Res = std::unique_ptr<PGresult, ResClear>;

class Conn {
 public:
  Conn() {
    c_ = PQconnectdb("application_name=consume-bench");
    if (PQstatus(c_) != CONNECTION_OK) {
      throw std::runtime_error(std::string("connect: ") + PQerrorMessage(c_));
    }
    PQsetNoticeProcessor(
        c_, [](void*, const char*) {}, nullptr);
  }
  ~Conn() { PQfinish(c_); }
  Conn(const Conn&) = delete;
  Conn& operator=(const Conn&) = delete;
  Res Exec(const std::string& sql,
           const std::vector<std::string>& params = {}) {
    std::vector<const char*> p;
    for (const auto& s : params) p.push_back(s.c_str());
    Res r(PQexecParams(c_, sql.c_str(), static_cast<int>(p.size()), nullptr,
                       p.data(), nullptr, nullptr, 0));
    const auto st = PQresultStatus(r.get());
    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
      throw std::runtime_error(std::string(PQerrorMessage(c_)) +
                               " in: " + sql.substr(0, 160));
    }
    return r;
  }
  std::string Value(const std::string& sql,
                    const std::vector<std::string>& params = {}) {
    Res r = Exec(sql, params);
    return PQntuples(r.get()) && !PQgetisnull(r.get(), 0, 0)
               ? PQgetvalue(r.get(), 0, 0)
               : "";
  }
  int Pid() { return PQbackendPID(c_); }

 private:
  PGconn* c_;
};

double Ms(Clock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

struct Dist {
  double p50 = 0, p99 = 0, mean = 0, max = 0;
};
Dist Of(std::vector<double> v) {
  Dist d;
  if (v.empty()) return d;
  std::sort(v.begin(), v.end());
  d.p50 = v[v.size() / 2];
  d.p99 = v[std::min(v.size() - 1, v.size() * 99 / 100)];
  d.max = v.back();
  for (double x : v) d.mean += x;
  d.mean /= static_cast<double>(v.size());
  return d;
}
double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}
std::string F(double v, int prec = 2) {
  std::ostringstream s;
  s.setf(std::ios::fixed);
  s.precision(prec);
  s << v;
  return s.str();
}

// CPU seconds (utime + stime) of a server backend.
double BackendCpu(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(in, line);
  std::stringstream ss(line.substr(line.rfind(')') + 2));
  std::vector<std::string> f;
  for (std::string x; ss >> x;) f.push_back(x);
  return (std::stod(f[11]) + std::stod(f[12])) / sysconf(_SC_CLK_TCK);
}

// CPU seconds of this thread (the drains run on the main thread).
double ThreadCpu() {
  rusage r{};
  getrusage(RUSAGE_THREAD, &r);
  return r.ru_utime.tv_sec + r.ru_utime.tv_usec / 1e6 + r.ru_stime.tv_sec +
         r.ru_stime.tv_usec / 1e6;
}

// A drain: wall-clock rate and CPU per message, server and client.
struct Drain {
  double rate = 0;
  double server_us = 0;
  double client_us = 0;
};

class Bench {
 public:
  explicit Bench(Options o)
      : o_(std::move(o)),
        client_(Client::Connect("", ClientOptions{kSchema, 4 + o_.threads,
                                                  "consume-bench-client"})) {}

  void Run() {
    admin_.Exec("DROP SCHEMA IF EXISTS " + kSchema + " CASCADE");
    client_.InstallSchema();
    std::cout << "# consume_bench\n\nrounds " << o_.rounds << ", threads "
              << o_.threads << "; server "
              << admin_.Value("SHOW server_version") << "\n";
    if (On("pgq")) Pgq();
    if (On("produce")) ProduceCost();
    if (On("wait")) WaitSection();
    if (On("waiters")) WaitersSection();
    if (On("poll")) PollAt10M();
  }

 private:
  bool On(const std::string& s) const {
    return o_.only.empty() || o_.only.count(s) > 0;
  }
  std::string Msg(std::int64_t id) const {
    return kSchema + ".message_" + std::to_string(id);
  }
  std::int64_t TopicId(const std::string& name) {
    return std::stoll(admin_.Value(
        "SELECT id FROM " + kSchema + ".topic WHERE name = $1", {name}));
  }
  std::int64_t Register(const std::string& name, int partitions = 1) {
    TopicConfig config;
    config.partitions = partitions;
    return client_.Topic<Counter>(name).Register(config).id;
  }

  // Keyed, uncompacted messages with PgQ's payload text, n per statement
  // (one transaction each).
  void LoadTopic(std::int64_t id, long from, long n, long per) {
    for (long i = 0; i < n; i += per) {
      admin_.Exec("INSERT INTO " + Msg(id) +
                      " (message_key, schema_version, payload) SELECT 'k' || "
                      "(g % 10000), 1, ('{\"value\": ' || g || '}')::jsonb "
                      "FROM generate_series($1::bigint, $2::bigint) g",
                  {std::to_string(from + i),
                   std::to_string(from + std::min(n, i + per) - 1)});
    }
  }

  // ------------------------------------------------------------ (a) PgQ
  void Pgq() {
    std::cout << "\n## (a) Consumer throughput against PgQ, batch 500\n\n";
    admin_.Exec("CREATE EXTENSION IF NOT EXISTS pgq");
    admin_.Exec(
        "SELECT pgq.create_queue('cb') WHERE NOT EXISTS (SELECT 1 FROM "
        "pgq.queue WHERE queue_name = 'cb')");
    admin_.Exec("SELECT pgq.register_consumer('cb', 'c')");
    const std::int64_t id = Register("tput");
    auto consumer =
        client_.Topic<Counter>("tput").Consumer("c", ConsumerOptions{500});
    std::cout << "CPU per message in us, server (the consuming backend) + "
                 "client (the consuming thread, decoding included).\n\n"
                 "| round | backlog | library msg/s | PgQ msg/s | library / "
                 "PgQ | library CPU/msg | PgQ CPU/msg | PgQ / library CPU | "
                 "library Polls | PgQ batches |\n|---|---|---|---|---|---|---|"
                 "---|---|---|\n";
    std::vector<double> ratios, cpu_ratios;
    long next = 1;
    for (int r = 0; r < o_.rounds; ++r) {
      // The backlog: 500 events per transaction and a tick after each
      // (ticker_max_count is 500), so every PgQ batch holds 500 events; the
      // topic gets the same payloads, 500 per transaction.
      for (long i = 0; i < o_.messages; i += 500) {
        admin_.Exec(
            "SELECT count(pgq.insert_event('cb', 'k' || (g % 10000), "
            "'{\"value\": ' || g || '}')) FROM generate_series($1::bigint, "
            "$2::bigint) g",
            {std::to_string(next + i), std::to_string(next + i + 499)});
        admin_.Exec("SELECT pgq.ticker('cb')");
      }
      LoadTopic(id, next, o_.messages, 500);
      next += o_.messages;
      admin_.Exec("ANALYZE");
      Drain lib, pgq;
      long lib_polls = 0, pgq_batches = 0;
      for (int leg = 0; leg < 2; ++leg) {
        if ((leg + r) % 2 == 0) {
          lib = LibraryDrain(consumer, lib_polls);
        } else {
          pgq = PgqDrain(pgq_batches);
        }
      }
      ratios.push_back(lib.rate / pgq.rate);
      cpu_ratios.push_back((pgq.server_us + pgq.client_us) /
                           (lib.server_us + lib.client_us));
      std::cout << "| " << r + 1 << " | " << o_.messages << " | "
                << F(lib.rate, 0) << " | " << F(pgq.rate, 0) << " | "
                << F(ratios.back()) << " | " << F(lib.server_us) << " + "
                << F(lib.client_us) << " | " << F(pgq.server_us) << " + "
                << F(pgq.client_us) << " | " << F(cpu_ratios.back()) << " | "
                << lib_polls << " | " << pgq_batches << " |\n";
    }
    std::cout << "\nmedian library / PgQ: throughput **" << F(Median(ratios))
              << "**, CPU per message (PgQ / library) **"
              << F(Median(cpu_ratios)) << "**\n";
  }

  // Poll + commit until empty.
  Drain LibraryDrain(compaction::Consumer<Counter>& consumer, long& polls) {
    long got = 0;
    std::int64_t sum = 0;
    // The client's connections (all idle now), for their server CPU.
    std::vector<int> pids;
    Res r = admin_.Exec(
        "SELECT pid FROM pg_stat_activity WHERE application_name = "
        "'consume-bench-client'");
    for (int i = 0; i < PQntuples(r.get()); ++i) {
      pids.push_back(std::stoi(PQgetvalue(r.get(), i, 0)));
    }
    auto server = [&] {
      double s = 0;
      for (int pid : pids) s += BackendCpu(pid);
      return s;
    };
    const double s0 = server(), c0 = ThreadCpu();
    const auto t0 = Clock::now();
    for (;;) {
      Tx tx = client_.Begin();
      auto batch = consumer.Poll(tx);
      tx.Commit();
      ++polls;
      if (batch.empty()) break;
      for (const auto& d : batch) sum += d.message->value;
      got += static_cast<long>(batch.size());
    }
    const double s = Ms(Clock::now() - t0) / 1000;
    if (got != o_.messages) {
      throw std::runtime_error("library consumer got " + std::to_string(got));
    }
    checksum_ += sum;
    return Drain{got / s, (server() - s0) * 1e6 / got,
                 (ThreadCpu() - c0) * 1e6 / got};
  }

  // PgQ's consumer loop: next_batch, get_batch_events, finish_batch, one
  // transaction per batch; payloads decoded as the library decodes them.
  Drain PgqDrain(long& batches) {
    Conn c;
    const int pid = c.Pid();
    const double s0 = BackendCpu(pid), c0 = ThreadCpu();
    long got = 0;
    std::int64_t sum = 0;
    const auto t0 = Clock::now();
    for (;;) {
      c.Exec("BEGIN");
      const std::string batch = c.Value("SELECT pgq.next_batch('cb', 'c')");
      ++batches;
      if (batch.empty()) {
        c.Exec("COMMIT");
        break;
      }
      Res ev =
          c.Exec("SELECT ev_id, ev_type, ev_data FROM pgq.get_batch_events($1)",
                 {batch});
      for (int i = 0; i < PQntuples(ev.get()); ++i) {
        Counter v = nlohmann::json::parse(PQgetvalue(ev.get(), i, 2));
        sum += v.value;
        ++got;
      }
      c.Exec("SELECT pgq.finish_batch($1)", {batch});
      c.Exec("COMMIT");
    }
    const double s = Ms(Clock::now() - t0) / 1000;
    if (got != o_.messages) {
      throw std::runtime_error("PgQ consumer got " + std::to_string(got));
    }
    checksum_ += sum;
    return Drain{got / s, (BackendCpu(pid) - s0) * 1e6 / got,
                 (ThreadCpu() - c0) * 1e6 / got};
  }

  // ------------------------------------------------------ produce cells
  // The client's connections' server CPU seconds, by backend pid.
  std::map<int, double> ClientBackendCpu() {
    std::map<int, double> out;
    Res r = admin_.Exec(
        "SELECT pid FROM pg_stat_activity WHERE application_name = "
        "'consume-bench-client'");
    for (int i = 0; i < PQntuples(r.get()); ++i) {
      const int pid = std::stoi(PQgetvalue(r.get(), i, 0));
      out[pid] = BackendCpu(pid);
    }
    return out;
  }

  // Compacted produces (10,000 keys) from o_.threads threads for
  // o_.seconds; produces per second, and the server CPU per produce of the
  // client's backends (less noisy than wall time on a shared machine).
  struct Rate {
    double per_s = 0;
    double server_us = 0;
  };
  Rate ProduceRate(const std::string& topic) {
    std::atomic<long> n{0};
    std::atomic<bool> stop{false};
    std::vector<std::thread> ts;
    const std::map<int, double> cpu0 = ClientBackendCpu();
    for (int t = 0; t < o_.threads; ++t) {
      ts.emplace_back([&, t] {
        auto producer = client_.Topic<Counter>(topic).RegisterProducer();
        std::mt19937_64 rng(t * 7919 + 1);
        while (!stop.load()) {
          const std::string key = "k" + std::to_string(rng() % 10000);
          producer.Produce(
              Counter{1},
              ProduceOptions{key, compaction::CompactionOptions{
                                      static_cast<std::int64_t>(rng() >> 2)}});
          ++n;
        }
      });
    }
    const auto t0 = Clock::now();
    std::this_thread::sleep_for(std::chrono::duration<double>(o_.seconds));
    stop = true;
    for (auto& t : ts) t.join();
    const double ms = Ms(Clock::now() - t0);
    double cpu = 0;
    for (const auto& [pid, after] : ClientBackendCpu()) {
      const auto before = cpu0.find(pid);
      cpu += after - (before == cpu0.end() ? 0 : before->second);
    }
    return Rate{n.load() / (ms / 1000), cpu * 1e6 / std::max(1L, n.load())};
  }

  // ------------------------------------------- (c) the columns' cost
  void ProduceCost() {
    std::cout << "\n## (c) Produce with the consumption columns and index "
                 "vs without\n\n";
    // with: the baseline; nocheck: the same minus the CHECK that holds a
    // row's partition to its key's (what the CHECK costs); without: the
    // same build's tables minus what consuming added.
    const std::vector<std::string> names = {"with_cols", "nocheck_cols",
                                            "without_cols"};
    std::vector<std::int64_t> ids;
    for (const std::string& n : names) ids.push_back(Register(n));
    admin_.Exec("ALTER TABLE " + Msg(ids[1]) + " DROP CONSTRAINT message_" +
                std::to_string(ids[1]) + "_partition_of_key");
    const std::int64_t without = ids[2];
    admin_.Exec("DROP INDEX " + kSchema + ".message_" +
                std::to_string(without) + "_consume");
    admin_.Exec("ALTER TABLE " + Msg(without) +
                " DROP COLUMN partition, DROP COLUMN xid");
    // Its produce function as it was before the columns: the message
    // insert names no partition (the CHECK went with the column).
    std::string def =
        admin_.Value("SELECT pg_get_functiondef($1::regprocedure)",
                     {kSchema + ".produce_" + std::to_string(without) +
                      "(text, integer, bigint, jsonb)"});
    const std::size_t cols = def.find("payload, partition)");
    const std::size_t expr =
        def.find(",\n           ((pg_catalog.hashtextextended");
    const std::size_t from = def.find("\n    FROM xid_first", expr);
    if (cols == std::string::npos || expr == std::string::npos ||
        from == std::string::npos || expr < cols) {
      throw std::runtime_error("produce_<id> is not in the expected form");
    }
    def.erase(expr, from - expr);
    def.replace(cols, 19, "payload)");
    admin_.Exec(def);
    for (std::int64_t t : ids) {
      admin_.Exec("INSERT INTO " + kSchema + ".compaction_head_" +
                  std::to_string(t) +
                  " (message_key) SELECT 'k' || g FROM generate_series(0, "
                  "9999) g");
      admin_.Exec("VACUUM ANALYZE " + Msg(t));
    }
    const std::size_t nv = ids.size();
    // Server CPU of one backend per produce: the least noisy figure on a
    // shared machine (CPU time, not wall time).
    Conn c;
    const int pid = c.Pid();
    std::cout << "Backend CPU per produce, one backend, blocks of 10,000 "
                 "compacted (produce_<id>) and 50,000 plain INSERTs (each "
                 "block a DO loop, one transaction), rotated; ratios to "
                 "without:\n\n"
                 "| round | compacted with | no CHECK | without | with | no "
                 "CHECK | plain with | no CHECK | without | with | no CHECK "
                 "|\n|---|---|---|---|---|---|---|---|---|---|---|\n";
    std::vector<double> rc[2], rp[2];
    for (int r = 0; r < o_.rounds + 2; ++r) {
      std::vector<std::array<double, 2>> us(nv);
      for (std::size_t leg = 0; leg < nv; ++leg) {
        const std::size_t v = (leg + r) % nv;
        const std::int64_t t = ids[v];
        const std::string base = std::to_string(r * 100000);
        double before = BackendCpu(pid);
        c.Exec("DO $$ BEGIN FOR i IN 1..10000 LOOP PERFORM " + kSchema +
               ".produce_" + std::to_string(t) + "('k' || (i % 10000), 1, " +
               base + " + i, '{\"value\": 1}'::jsonb); END LOOP; END $$");
        us[v][0] = (BackendCpu(pid) - before) * 1e6 / 10000;
        before = BackendCpu(pid);
        c.Exec("DO $$ BEGIN FOR i IN 1..50000 LOOP INSERT INTO " + Msg(t) +
               " (schema_version, payload) VALUES (1, '{\"value\": 1}'); "
               "END LOOP; END $$");
        us[v][1] = (BackendCpu(pid) - before) * 1e6 / 50000;
      }
      std::cout << "| " << r + 1;
      for (int kind = 0; kind < 2; ++kind) {
        for (std::size_t v = 0; v < nv; ++v) {
          std::cout << " | " << F(us[v][kind], 1) << " us";
        }
        for (int v = 0; v < 2; ++v) {
          (kind == 0 ? rc : rp)[v].push_back(us[v][kind] / us[2][kind]);
          std::cout << " | " << F((kind == 0 ? rc : rp)[v].back());
        }
      }
      std::cout << " |\n";
    }
    std::cout << "\nmedian CPU / without: compacted with **" << F(Median(rc[0]))
              << "**, no CHECK **" << F(Median(rc[1])) << "**; plain with **"
              << F(Median(rp[0])) << "**, no CHECK **" << F(Median(rp[1]))
              << "**\n\n";
    std::cout << "Library compacted produces (autocommit), " << o_.threads
              << " threads, " << o_.seconds
              << " s cells rotated (server CPU: the client's backends, "
                 "10 ms ticks); ratios to without:\n\n| round | with /s | no "
                 "CHECK /s | without /s | with | no CHECK | server us with | "
                 "no CHECK | without | CPU with | no CHECK |\n"
                 "|---|---|---|---|---|---|---|---|---|---|---|\n";
    std::vector<double> rt[2], rcpu[2];
    std::vector<double> total(nv, 0);
    for (int r = 0; r < o_.cells; ++r) {
      std::vector<Rate> rate(nv);
      for (std::size_t leg = 0; leg < nv; ++leg) {
        const std::size_t v = (leg + r) % nv;
        rate[v] = ProduceRate(names[v]);
        total[v] += rate[v].per_s;
      }
      std::cout << "| " << r + 1;
      for (std::size_t v = 0; v < nv; ++v)
        std::cout << " | " << F(rate[v].per_s, 0);
      for (int v = 0; v < 2; ++v) {
        rt[v].push_back(rate[v].per_s / rate[2].per_s);
        std::cout << " | " << F(rt[v].back());
      }
      for (std::size_t v = 0; v < nv; ++v)
        std::cout << " | " << F(rate[v].server_us, 1);
      for (int v = 0; v < 2; ++v) {
        rcpu[v].push_back(rate[v].server_us / rate[2].server_us);
        std::cout << " | " << F(rcpu[v].back());
      }
      std::cout << " |\n";
    }
    std::cout << "\nthroughput / without: median of cells with **"
              << F(Median(rt[0])) << "**, no CHECK **" << F(Median(rt[1]))
              << "**; of the sums with **" << F(total[0] / total[2])
              << "**, no CHECK **" << F(total[1] / total[2])
              << "**; server CPU per produce / without: with **"
              << F(Median(rcpu[0])) << "**, no CHECK **" << F(Median(rcpu[1]))
              << "**\n";
  }

  // ----------------------------------------------------------- (d) Wait
  void WaitSection() {
    std::cout << "\n## (d) Wait: wake-up latency and its cost to produces\n\n";
    for (int parts : {1, 1024}) {
      const std::string name = "wake_" + std::to_string(parts);
      Register(name, parts);
      // An idle consumer with its positions, for the cost cells below.
      Register("idle_" + std::to_string(parts), parts);
      auto idle =
          client_.Topic<Counter>("idle_" + std::to_string(parts)).Consumer("c");
      client_.InTransaction([&](Tx& tx) { idle.Poll(tx); });
    }
    std::cout << "| partitions | Wait(0) on a caught-up consumer (a first "
                 "probe: the log, then every position) mean | p99 | wake-up "
                 "p50 | p99 | max | wakes |\n"
                 "|---|---|---|---|---|---|---|\n";
    for (int parts : {1, 1024}) {
      auto idle =
          client_.Topic<Counter>("idle_" + std::to_string(parts)).Consumer("c");
      std::vector<double> probe;
      for (int i = 0; i < 100; ++i) {
        const auto t0 = Clock::now();
        idle.Wait(0ms);
        probe.push_back(Ms(Clock::now() - t0));
      }
      const Dist p = Of(probe);
      const Dist w = Of(WakeLatencies("wake_" + std::to_string(parts)));
      std::cout << "| " << parts << " | " << F(p.mean) << " ms | " << F(p.p99)
                << " ms | " << F(w.p50, 1) << " ms | " << F(w.p99, 1)
                << " ms | " << F(w.max, 1) << " ms | " << o_.wakes << " |\n";
    }
    std::cout << "\nCompacted produces, " << o_.threads << " threads, "
              << o_.seconds
              << " s cells alternated, against one idle Wait loop (a caught-"
                 "up consumer of another topic):\n\n| round | no waiter /s | "
                 "waiter, 1 partition | ratio | waiter, 1024 partitions | "
                 "ratio |\n|---|---|---|---|---|---|\n";
    Register("with_cols");  // a no-op when (c) ran
    std::vector<double> r1, r1024;
    double waiter_cpu[2] = {0, 0}, waiter_s[2] = {0, 0}, total[3] = {0, 0, 0};
    for (int r = 0; r < o_.cells; ++r) {
      double rate[3];
      for (int leg = 0; leg < 3; ++leg) {
        const int v = (leg + r) % 3;
        std::atomic<bool> stop{false};
        std::thread waiter;
        int pid = 0;
        double cpu = 0;
        const auto t0 = Clock::now();
        if (v > 0) {
          const std::string idle = v == 1 ? "idle_1" : "idle_1024";
          waiter = std::thread([&, idle] {
            auto c = client_.Topic<Counter>(idle).Consumer("c");
            while (!stop.load()) c.Wait(200ms);
          });
          // The waiter's backend, for the server CPU its probes take.
          for (int i = 0; i < 100 && pid == 0; ++i) {
            std::this_thread::sleep_for(10ms);
            const std::string p = admin_.Value(
                "SELECT pid FROM pg_stat_activity WHERE query LIKE "
                "'/* compaction:Wait%' AND strpos(query, $1) > 0",
                {".message_" + std::to_string(TopicId(idle)) + " m"});
            if (!p.empty()) pid = std::stoi(p);
          }
          if (pid != 0) cpu = BackendCpu(pid);
        }
        rate[v] = ProduceRate("with_cols").per_s;
        total[v] += rate[v];
        if (pid != 0) {
          waiter_cpu[v - 1] += BackendCpu(pid) - cpu;
          waiter_s[v - 1] += Ms(Clock::now() - t0) / 1000;
        }
        stop = true;
        if (waiter.joinable()) waiter.join();
      }
      r1.push_back(rate[1] / rate[0]);
      r1024.push_back(rate[2] / rate[0]);
      std::cout << "| " << r + 1 << " | " << F(rate[0], 0) << " | "
                << F(rate[1], 0) << " | " << F(r1.back()) << " | "
                << F(rate[2], 0) << " | " << F(r1024.back()) << " |\n";
    }
    std::cout << "\nwith waiter / without: 1 partition, median of cells **"
              << F(Median(r1)) << "**, of the sums **" << F(total[1] / total[0])
              << "**; 1024 partitions **" << F(Median(r1024)) << "**, **"
              << F(total[2] / total[0]) << "**. The idle waiter's backend used "
              << F(100 * waiter_cpu[0] / std::max(waiter_s[0], 1e-9))
              << " % (1 partition) and "
              << F(100 * waiter_cpu[1] / std::max(waiter_s[1], 1e-9))
              << " % (1024 partitions) of one core over its cells\n";
  }

  // ------------------------------------------------- (d) N idle waiters
  // Each waiter's quick probe reads pg_locks whole, which takes every lock
  // manager partition lock in turn: what that costs produces (whose
  // INSERTs take those locks too) as the waiters multiply. Cells alternate
  // no waiter and N waiters, each a caught-up consumer of its own on an
  // idle one-partition topic, on connections of their own.
  void WaitersSection() {
    std::cout << "\n## (d) Wait: N idle waiters and their cost to produces\n\n"
              << "Compacted produces, " << o_.threads << " threads, "
              << o_.seconds << " s cells, " << o_.cells
              << " pairs alternated:\n\n| waiters | no waiter /s (sum) | "
                 "N waiters /s (sum) | ratio, median of pairs | ratio of "
                 "sums | waiters' backends, % of one core |\n"
                 "|---|---|---|---|---|---|\n";
    Register("with_cols");  // a no-op when (c) ran
    Register("idle_waiters");
    for (const int n : o_.waiters) {
      Client waiters = Client::Connect(
          "", ClientOptions{kSchema, n, "consume-bench-waiters"});
      auto topic = waiters.Topic<Counter>("idle_waiters");
      for (int w = 0; w < n; ++w) {
        auto c = topic.Consumer("w" + std::to_string(w));
        waiters.InTransaction([&](Tx& tx) { c.Poll(tx); });
      }
      std::vector<double> ratio;
      double total[2] = {0, 0}, cpu = 0, cpu_s = 0;
      for (int r = 0; r < o_.cells; ++r) {
        double rate[2] = {0, 0};
        for (int leg = 0; leg < 2; ++leg) {
          const int v = (leg + r) % 2;
          if (v == 0) {
            rate[0] = ProduceRate("with_cols").per_s;
            continue;
          }
          std::atomic<bool> stop{false};
          std::vector<std::thread> ts;
          for (int w = 0; w < n; ++w) {
            ts.emplace_back([&, w] {
              auto c = topic.Consumer("w" + std::to_string(w));
              while (!stop.load()) c.Wait(200ms);
            });
          }
          std::this_thread::sleep_for(100ms);  // every waiter probing
          const std::vector<int> pids = WaiterPids();
          double before = 0;
          for (int pid : pids) before += BackendCpu(pid);
          const auto t0 = Clock::now();
          rate[1] = ProduceRate("with_cols").per_s;
          for (int pid : pids) cpu += BackendCpu(pid);
          cpu -= before;
          cpu_s += Ms(Clock::now() - t0) / 1000;
          stop = true;
          for (auto& t : ts) t.join();
        }
        total[0] += rate[0];
        total[1] += rate[1];
        ratio.push_back(rate[1] / rate[0]);
      }
      std::cout << "| " << n << " | " << F(total[0], 0) << " | "
                << F(total[1], 0) << " | " << F(Median(ratio)) << " | "
                << F(total[1] / total[0]) << " | "
                << F(100 * cpu / std::max(cpu_s, 1e-9), 1) << " |\n";
    }
  }

  std::vector<int> WaiterPids() {
    std::vector<int> out;
    const std::string all = admin_.Value(
        "SELECT string_agg(pid::text, ',') FROM pg_stat_activity WHERE "
        "application_name = 'consume-bench-waiters'");
    std::stringstream ss(all);
    for (std::string p; std::getline(ss, p, ',');) out.push_back(std::stoi(p));
    return out;
  }

  // The time from a produce's commit returning to a waiting consumer's Wait
  // returning, o_.wakes times at varying phases of its probe interval.
  std::vector<double> WakeLatencies(const std::string& topic) {
    auto consumer = client_.Topic<Counter>(topic).Consumer("c");
    auto producer = client_.Topic<Counter>(topic).RegisterProducer();
    auto drain = [&] {
      for (;;) {
        Tx tx = client_.Begin();
        const bool empty = consumer.Poll(tx).empty();
        tx.Commit();
        if (empty && !consumer.Wait(0ms)) return;
      }
    };
    drain();
    std::vector<double> out;
    std::mt19937 rng(42);
    for (int i = 0; i < o_.wakes; ++i) {
      std::atomic<bool> waiting{false};
      Clock::time_point woke;
      std::thread waiter([&] {
        waiting = true;
        if (!consumer.Wait(10s)) throw std::runtime_error("Wait timed out");
        woke = Clock::now();
      });
      while (!waiting.load()) std::this_thread::yield();
      std::this_thread::sleep_for(std::chrono::milliseconds(5 + rng() % 50));
      producer.Produce(Counter{i});
      const auto committed = Clock::now();
      waiter.join();
      out.push_back(std::max(0.0, Ms(woke - committed)));
      drain();
    }
    return out;
  }

  // ------------------------------------------------- (b) Poll at 10M
  void PollAt10M() {
    std::cout << "\n## (b) Poll cost at " << o_.big << " messages\n\n";
    if (o_.big < (o_.catchup_batches + 1) * 500L) {
      throw std::runtime_error("--big is smaller than the catch-up batches");
    }
    const std::int64_t id = Register("big");
    const std::string msg = Msg(id);
    const auto t0 = Clock::now();
    // A bulk load of the produce path's layout: 10,000 messages per
    // transaction (each its own xid), then VACUUM ANALYZE.
    admin_.Exec("DO $$ DECLARE i bigint := 0; BEGIN WHILE i < " +
                std::to_string(o_.big) + " LOOP INSERT INTO " + msg +
                " (message_key, schema_version, payload) SELECT 'k' || (g % "
                "1000000), 1, ('{\"value\": ' || g || '}')::jsonb FROM "
                "generate_series(i + 1, least(i + 10000, " +
                std::to_string(o_.big) +
                ")) g; COMMIT; i := i + 10000; END LOOP; END $$");
    const double load_s = Ms(Clock::now() - t0) / 1000;
    const auto t1 = Clock::now();
    admin_.Exec("VACUUM ANALYZE " + msg);
    admin_.Exec("ALTER TABLE " + msg + " SET (autovacuum_enabled = false)");
    std::cout << "load: " << o_.big << " rows in " << F(load_s, 0)
              << " s (INSERT ... SELECT generate_series, 10,000 per "
                 "transaction), VACUUM ANALYZE "
              << F(Ms(Clock::now() - t1) / 1000, 0) << " s; table "
              << admin_.Value("SELECT pg_size_pretty(pg_table_size('" + msg +
                              "'))")
              << ", consume index "
              << admin_.Value("SELECT pg_size_pretty(pg_relation_size('" + msg +
                              "_consume'))")
              << "\n\n| round | open transaction | catch-up ms/Poll p50 | "
                 "p99 | mean | first 100 mean | last 100 mean | tail "
                 "ms/Poll p50 | p99 | tail msgs/Poll | tail Polls | "
                 "position dead rows |\n|---|---|---|---|---|---|---|---|---|"
                 "---|---|---|\n";
    std::vector<double> catch_none, catch_open, tail_none, tail_open;
    for (int r = 0; r < o_.rounds * 2; ++r) {
      const bool open = r % 2 == 1;
      Conn holder;
      if (open) {
        holder.Exec("BEGIN ISOLATION LEVEL REPEATABLE READ");
        holder.Exec("SELECT pg_current_xact_id()");
        holder.Exec("SELECT count(*) FROM " + kSchema + ".topic");
      }
      const std::string tag = std::to_string(r);
      // Catch-up from the start of the log.
      auto catcher =
          client_.Topic<Counter>("big").Consumer("catch" + tag, {500});
      std::vector<double> per;
      for (int b = 0; b < o_.catchup_batches; ++b) {
        const auto s = Clock::now();
        Tx tx = client_.Begin();
        const size_t n = catcher.Poll(tx).size();
        tx.Commit();
        per.push_back(Ms(Clock::now() - s));
        if (n != 500) throw std::runtime_error("short catch-up batch");
      }
      // The tail: a producer adds 100 messages per transaction every 10 ms
      // while the consumer polls.
      auto tailer = client_.Topic<Counter>("big").Consumer("tail" + tag, {500});
      client_.InTransaction([&](Tx& tx) { tailer.Poll(tx); });
      client_.ResetConsumer("big", "tail" + tag, true);
      std::atomic<bool> stop{false};
      std::thread producer([&] {
        Conn p;
        long k = o_.big + 1 + r * 10000000L;
        while (!stop.load()) {
          p.Exec("INSERT INTO " + msg +
                     " (message_key, schema_version, payload) SELECT 'k' || "
                     "(g % 1000000), 1, ('{\"value\": ' || g || '}')::jsonb "
                     "FROM generate_series($1::bigint, $1::bigint + 99) g",
                 {std::to_string(k)});
          k += 100;
          std::this_thread::sleep_for(10ms);
        }
      });
      std::vector<double> tail;
      long tail_msgs = 0;
      const auto until =
          Clock::now() + std::chrono::duration<double>(o_.tail_seconds);
      while (Clock::now() < until) {
        const auto s = Clock::now();
        Tx tx = client_.Begin();
        const size_t n = tailer.Poll(tx).size();
        tx.Commit();
        if (n == 0) {
          std::this_thread::sleep_for(5ms);
          continue;
        }
        tail.push_back(Ms(Clock::now() - s));
        tail_msgs += static_cast<long>(n);
      }
      stop = true;
      producer.join();
      const std::string dead = admin_.Value(
          "SELECT n_dead_tup FROM pg_stat_user_tables WHERE relid = '" +
          kSchema + ".consumer_position'::regclass");
      if (open) holder.Exec("ROLLBACK");
      const Dist c = Of(per), t = Of(tail);
      const Dist first =
          Of(std::vector<double>(per.begin(), per.begin() + 100));
      const Dist last = Of(std::vector<double>(per.end() - 100, per.end()));
      (open ? catch_open : catch_none).push_back(c.mean);
      (open ? tail_open : tail_none).push_back(t.mean);
      std::cout << "| " << r / 2 + 1 << " | " << (open ? "yes" : "no") << " | "
                << F(c.p50) << " | " << F(c.p99) << " | " << F(c.mean) << " | "
                << F(first.mean) << " | " << F(last.mean) << " | " << F(t.p50)
                << " | " << F(t.p99) << " | "
                << (tail.empty() ? 0 : tail_msgs / tail.size()) << " | "
                << tail.size() << " | " << dead << " |\n";
      admin_.Exec("VACUUM " + kSchema + ".consumer_position");
    }
    std::cout << "\nmedian of round means, open / none: catch-up **"
              << F(Median(catch_open) / Median(catch_none)) << "**, tail **"
              << F(Median(tail_open) / Median(tail_none)) << "**\n";
  }

  Options o_;
  std::int64_t checksum_ = 0;  // keeps the decoding observable
  Conn admin_;
  Client client_;
};

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) throw std::runtime_error(a + " needs a value");
      return argv[++i];
    };
    if (a == "--only") {
      std::stringstream ss(next());
      for (std::string s; std::getline(ss, s, ',');) o.only.insert(s);
    } else if (a == "--rounds") {
      o.rounds = std::stoi(next());
    } else if (a == "--messages") {
      o.messages = std::stol(next());
    } else if (a == "--big") {
      o.big = std::stol(next());
    } else if (a == "--catchup-batches") {
      o.catchup_batches = std::stoi(next());
    } else if (a == "--tail-seconds") {
      o.tail_seconds = std::stod(next());
    } else if (a == "--cells") {
      o.cells = std::stoi(next());
    } else if (a == "--seconds") {
      o.seconds = std::stod(next());
    } else if (a == "--threads") {
      o.threads = std::stoi(next());
    } else if (a == "--wakes") {
      o.wakes = std::stoi(next());
    } else if (a == "--waiters") {
      o.waiters.clear();
      std::stringstream ss(next());
      for (std::string s; std::getline(ss, s, ',');) {
        o.waiters.push_back(std::stoi(s));
      }
    } else {
      std::cerr << "unknown option " << a << "\n";
      return 2;
    }
  }
  std::cout << std::unitbuf;  // the report grows as the run goes
  try {
    Bench(o).Run();
  } catch (const std::exception& e) {
    std::cerr << "consume_bench: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
