// compaction_bench: throughput/latency of libcompaction's lock, produce,
// read, janitor and stats paths against pgbench running the library's own
// SQL and against the designs the seed rejected (implemented here only).
//
//   compaction_bench [--short] [--out DIR] [--duration S] [--rounds N]
//                    [--threads 1,4,16] [--janitor-rows N] [--topics N]
//                    [--pgbench PATH] [--scripts DIR] [--only LIST]
//
// Connects through the PG* environment (deploy/local/pg.sh). Writes
// DIR/report.md (every figure), DIR/throughput.dat and DIR/plot.gp (gnuplot
// input for the throughput-vs-clients PNG). Exit status 1 when any workload
// raised an error, so the --short run doubles as a smoke test; there are no
// timing assertions. See test/bench/RESULTS.md.
#include <libpq-fe.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <limits>
#include <map>
#include <mutex>
#include <random>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "compaction/compaction.hpp"

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using compaction::Client;
using compaction::ClientOptions;
using compaction::CompactionOptions;
using compaction::ProduceOptions;
using compaction::Tx;

namespace {

struct Counter {
  static constexpr int kSchemaVersion = 1;
  std::int64_t value = 0;
};
void to_json(nlohmann::json& j, const Counter& c) { j = {{"value", c.value}}; }
void from_json(const nlohmann::json& j, Counter& c) { j.at("value").get_to(c.value); }

// ---------------------------------------------------------------- options
struct Options {
  bool short_mode = false;
  std::string out = "bench-out";
  double duration = 3.0;
  int rounds = 2;
  std::vector<int> threads = {1, 4, 16};
  long janitor_rows = 1000000;
  double janitor_cap = 60;  // seconds per sweep method
  int topics = 1000;
  std::string pgbench = "/usr/lib/postgresql/15/bin/pgbench";
  std::string scripts;
  std::set<std::string> only;  // empty: everything
  std::set<std::string> variants;  // empty: every variant
  std::string schema;
  int keys = 10000;
};

std::vector<int> ParseInts(const std::string& s) {
  std::vector<int> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');) out.push_back(std::stoi(item));
  return out;
}

// ------------------------------------------------------------ raw libpq
struct PgError : std::runtime_error {
  std::string sqlstate;
  PgError(std::string state, const std::string& msg)
      : std::runtime_error(msg), sqlstate(std::move(state)) {}
};

struct ResultDeleter {
  void operator()(PGresult* r) const { PQclear(r); }
};
using Res = std::unique_ptr<PGresult, ResultDeleter>;

class Conn {
 public:
  explicit Conn(const std::string& app) {
    const char* k[] = {"dbname", "application_name", nullptr};
    const char* v[] = {"", app.c_str(), nullptr};
    c_ = PQconnectdbParams(k, v, 1);
    if (PQstatus(c_) != CONNECTION_OK) {
      throw std::runtime_error(std::string("connect: ") + PQerrorMessage(c_));
    }
    PQsetNoticeProcessor(c_, [](void*, const char*) {}, nullptr);
  }
  ~Conn() { PQfinish(c_); }
  Conn(const Conn&) = delete;
  Conn& operator=(const Conn&) = delete;

  Res Exec(const std::string& sql, const std::vector<std::string>& params = {}) {
    std::vector<const char*> p;
    for (auto& s : params) p.push_back(s.c_str());
    Res r(params.empty() ? PQexec(c_, sql.c_str())
                         : PQexecParams(c_, sql.c_str(), (int)p.size(), nullptr,
                                        p.data(), nullptr, nullptr, 0));
    Check(r.get(), sql);
    return r;
  }
  void Prepare(const std::string& name, const std::string& sql) {
    Res r(PQprepare(c_, name.c_str(), sql.c_str(), 0, nullptr));
    Check(r.get(), sql);
  }
  Res Run(const std::string& name, const std::vector<std::string>& params) {
    std::vector<const char*> p;
    for (auto& s : params) p.push_back(s.c_str());
    Res r(PQexecPrepared(c_, name.c_str(), (int)p.size(), p.data(), nullptr,
                         nullptr, 0));
    Check(r.get(), name);
    return r;
  }
  std::string Value(const std::string& sql, const std::vector<std::string>& params = {}) {
    Res r = Exec(sql, params);
    return PQntuples(r.get()) ? PQgetvalue(r.get(), 0, 0) : "";
  }
  std::int64_t Int(const std::string& sql, const std::vector<std::string>& params = {}) {
    return std::stoll(Value(sql, params));
  }
  PGconn* get() { return c_; }

 private:
  void Check(PGresult* r, const std::string& what) {
    const auto st = PQresultStatus(r);
    if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK) return;
    const char* state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
    throw PgError(state ? state : "", std::string(PQerrorMessage(c_)) + " in: " +
                                          what.substr(0, 120));
  }
  PGconn* c_;
};

// ------------------------------------------------------------ statistics
struct Dist {
  double p50 = 0, p99 = 0, mean = 0;
};
Dist Percentiles(std::vector<double> v) {
  Dist d;
  if (v.empty()) return d;
  std::sort(v.begin(), v.end());
  auto at = [&](double q) { return v[std::min(v.size() - 1, (size_t)(q * v.size()))]; };
  d.p50 = at(0.50);
  d.p99 = at(0.99);
  double s = 0;
  for (double x : v) s += x;
  d.mean = s / v.size();
  return d;
}

struct TableStats {
  std::int64_t dead = 0, upd = 0, hot = 0, ins = 0, del = 0;
  std::int64_t wal = 0;  // pg_current_wal_lsn as bytes since 0/0
};

// CPU seconds: this process, its reaped children (pgbench), and the
// postmaster's reaped children (every backend that exited).
struct Cpu {
  double self = 0, children = 0, server = 0;
  long csw = 0;  // voluntary + involuntary context switches, self + children
};

double Seconds(const timeval& t) { return t.tv_sec + t.tv_usec / 1e6; }

Cpu ReadCpu(int postmaster) {
  Cpu c;
  rusage r{};
  getrusage(RUSAGE_SELF, &r);
  c.self = Seconds(r.ru_utime) + Seconds(r.ru_stime);
  c.csw = r.ru_nvcsw + r.ru_nivcsw;
  getrusage(RUSAGE_CHILDREN, &r);
  c.children = Seconds(r.ru_utime) + Seconds(r.ru_stime);
  c.csw += r.ru_nvcsw + r.ru_nivcsw;
  if (postmaster > 0) {
    std::ifstream in("/proc/" + std::to_string(postmaster) + "/stat");
    std::string line;
    std::getline(in, line);
    const size_t close = line.rfind(')');
    if (close != std::string::npos) {
      std::stringstream ss(line.substr(close + 2));
      std::vector<std::string> f;
      for (std::string x; ss >> x;) f.push_back(x);
      // fields after the name start at 3 (state); cutime/cstime are 16/17
      if (f.size() > 14) c.server = (std::stod(f[13]) + std::stod(f[14])) / sysconf(_SC_CLK_TCK);
    }
  }
  return c;
}

int ParentOf(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(in, line);
  const size_t close = line.rfind(')');
  if (close == std::string::npos) return 0;
  std::stringstream ss(line.substr(close + 2));
  std::string state;
  int ppid = 0;
  ss >> state >> ppid;
  return ppid;
}

struct Cell {
  double client_cpu = 0, server_cpu = 0;  // seconds over the cell
  long client_csw = 0;
  std::string workload, variant;
  int threads = 0;
  int round = 0;
  double seconds = 0;
  std::int64_t tx = 0, retries = 0, errors = 0, extra_tx = 0;
  std::vector<double> lat_us;
  TableStats delta;
  std::string note;
};

// ------------------------------------------------------------- the bench
class Bench {
 public:
  explicit Bench(Options o) : o_(std::move(o)), mon_("bench-monitor") {}

  int Run();

 private:
  // setup
  void Setup();
  std::int64_t TopicId(const std::string& name);
  std::string Head(const std::string& t) { return q_ + ".compaction_head_" + std::to_string(TopicId(t)); }
  std::string Msg(const std::string& t) { return q_ + ".message_" + std::to_string(TopicId(t)); }
  std::string Pkey(const std::string& t) { return "compaction_head_" + std::to_string(TopicId(t)) + "_pkey"; }
  void Populate(const std::string& topic, int nkeys);
  void PrintSettings();

  // measurement
  TableStats Snapshot();
  void WaitGone(const std::string& app);
  Cell Measure(const std::string& workload, const std::string& variant, int threads,
               const std::string& app, const std::function<void(Cell&)>& body,
               bool vacuum = true);
  // `w` is the workload shape; `topic` defaults to the workload's own topic.
  Cell RunLibrary(const std::string& w, int threads, const std::string& topic = "");
  Cell RunPgbench(const std::string& w, int threads);
  Cell RunRejected(const std::string& w, const std::string& design, int threads);
  void ThroughputSection();
  void SqlCheck();

  // janitor and stats
  void InsertHeadless(const std::string& topic, long from, long n, bool expired);
  void JanitorSection();
  void StatsSection();

  // report
  void Report();

  // Runs `threads` workers calling step(thread, rng, retries) for the cell's
  // duration; each call is one transaction whose latency is recorded.
  template <class Init, class Step>
  void Workers(Cell& cell, int threads, Init&& init, Step&& step);

  Options o_;
  Conn mon_;
  std::string q_;  // quoted schema
  std::map<std::string, std::int64_t> topic_ids_;
  std::vector<Cell> cells_;
  std::vector<std::string> settings_;
  std::vector<std::string> janitor_md_, stats_md_, sqlcheck_md_, errors_;
  bool pgss_ = false;
  std::uint64_t cell_seq_ = 0;
  int postmaster_ = 0;
  std::atomic<std::int64_t> total_errors_{0};
};

void Bench::Setup() {
  o_.schema = o_.short_mode ? "bench_smoke_" + std::to_string(getpid()) : "bench";
  q_ = "\"" + o_.schema + "\"";
  mon_.Exec("DROP SCHEMA IF EXISTS " + q_ + " CASCADE");
  Client c = Client::Connect("", ClientOptions{o_.schema, 2, "bench-setup"});
  c.InstallSchema();
  for (const char* t : {"inc", "hot", "new", "read", "produce"}) {
    c.Topic<Counter>(t).Register();
  }
  postmaster_ = ParentOf(PQbackendPID(mon_.get()));
  pgss_ = mon_.Value("SELECT count(*) FROM pg_settings WHERE name = 'shared_preload_libraries' "
                     "AND setting LIKE '%pg_stat_statements%'") == "1";
  if (pgss_) mon_.Exec("CREATE EXTENSION IF NOT EXISTS pg_stat_statements");
  Populate("inc", o_.keys);
  Populate("read", o_.keys);
  Populate("produce", o_.keys);
  Populate("hot", 1);
  for (const char* t : {"inc", "hot", "new", "read", "produce"}) {
    // Autovacuum off on the measured tables: every cell starts from an
    // explicit VACUUM, so n_dead_tup deltas are the cell's own (net of HOT
    // pruning, which still runs).
    for (auto& tab : {Head(t), Msg(t)}) {
      mon_.Exec("ALTER TABLE " + tab + " SET (autovacuum_enabled = false)");
      mon_.Exec("VACUUM ANALYZE " + tab);
    }
  }
}

std::int64_t Bench::TopicId(const std::string& name) {
  auto it = topic_ids_.find(name);
  if (it != topic_ids_.end()) return it->second;
  const std::int64_t id = mon_.Int("SELECT id FROM " + q_ + ".topic WHERE name = $1", {name});
  topic_ids_[name] = id;
  return id;
}

void Bench::Populate(const std::string& topic, int nkeys) {
  mon_.Exec("WITH m AS (INSERT INTO " + Msg(topic) +
            " (message_key, schema_version, compaction_rank, payload) "
            "SELECT i::text, 1, 0, '{\"value\": 0}' FROM generate_series(1, " +
            std::to_string(nkeys) + ") i RETURNING id, message_key) INSERT INTO " +
            Head(topic) +
            " (message_key, head_id, schema_version, compaction_rank, created_at, "
            "updated_at, idle_since) SELECT message_key, id, 1, 0, now(), now(), NULL FROM m");
}

void Bench::PrintSettings() {
  Res r = mon_.Exec(
      "SELECT name, setting, coalesce(unit, '') FROM pg_settings WHERE name IN "
      "('server_version', 'shared_buffers', 'fsync', 'synchronous_commit', "
      "'full_page_writes', 'wal_level', 'max_connections', 'work_mem', 'autovacuum', "
      "'jit', 'max_wal_size', 'checkpoint_timeout', 'shared_preload_libraries', "
      "'random_page_cost', 'effective_cache_size', 'huge_pages', "
      "'default_transaction_isolation', 'wal_buffers', 'max_worker_processes') ORDER BY name");
  for (int i = 0; i < PQntuples(r.get()); ++i) {
    settings_.push_back(std::string(PQgetvalue(r.get(), i, 0)) + " = " +
                        PQgetvalue(r.get(), i, 1) + " " + PQgetvalue(r.get(), i, 2));
  }
}

TableStats Bench::Snapshot() {
  Res r = mon_.Exec(
      "SELECT coalesce(sum(n_dead_tup),0), coalesce(sum(n_tup_upd),0), "
      "coalesce(sum(n_tup_hot_upd),0), coalesce(sum(n_tup_ins),0), "
      "coalesce(sum(n_tup_del),0), pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint "
      "FROM pg_stat_user_tables WHERE schemaname = $1",
      {o_.schema});
  TableStats s;
  s.dead = std::stoll(PQgetvalue(r.get(), 0, 0));
  s.upd = std::stoll(PQgetvalue(r.get(), 0, 1));
  s.hot = std::stoll(PQgetvalue(r.get(), 0, 2));
  s.ins = std::stoll(PQgetvalue(r.get(), 0, 3));
  s.del = std::stoll(PQgetvalue(r.get(), 0, 4));
  s.wal = std::stoll(PQgetvalue(r.get(), 0, 5));
  return s;
}

// Backends flush their table statistics when they exit; waiting for them
// makes the n_dead_tup / n_tup_* deltas complete.
void Bench::WaitGone(const std::string& app) {
  for (int i = 0; i < 500; ++i) {
    if (mon_.Int("SELECT count(*) FROM pg_stat_activity WHERE application_name = $1", {app}) == 0) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

Cell Bench::Measure(const std::string& workload, const std::string& variant, int threads,
                    const std::string& app, const std::function<void(Cell&)>& body,
                    bool vacuum) {
  Cell cell;
  cell.workload = workload;
  cell.variant = variant;
  cell.threads = threads;
  if (vacuum) mon_.Exec("VACUUM " + Head(workload));
  const TableStats before = Snapshot();
  const Cpu cpu0 = ReadCpu(postmaster_);
  try {
    body(cell);
  } catch (const std::exception& e) {
    ++cell.errors;
    cell.note = e.what();
  }
  WaitGone(app);
  // The postmaster adds a backend's CPU to its own cutime when it reaps it,
  // a moment after the backend left pg_stat_activity.
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  const Cpu cpu1 = ReadCpu(postmaster_);
  cell.client_cpu = (cpu1.self - cpu0.self) + (cpu1.children - cpu0.children);
  cell.server_cpu = cpu1.server - cpu0.server;
  cell.client_csw = cpu1.csw - cpu0.csw;
  const TableStats after = Snapshot();
  cell.delta.dead = after.dead - before.dead;
  cell.delta.upd = after.upd - before.upd;
  cell.delta.hot = after.hot - before.hot;
  cell.delta.ins = after.ins - before.ins;
  cell.delta.del = after.del - before.del;
  cell.delta.wal = after.wal - before.wal;
  if (cell.errors) {
    total_errors_ += cell.errors;
    errors_.push_back(workload + "/" + variant + "/" + std::to_string(threads) + ": " +
                      std::to_string(cell.errors) + " errors; " + cell.note);
  }
  std::fprintf(stderr, "  %-8s %-10s %2d thr: %8.0f tx/s p50 %7.0f us p99 %7.0f us retries %lld%s\n",
               workload.c_str(), variant.c_str(), threads,
               cell.seconds > 0 ? cell.tx / cell.seconds : 0.0, Percentiles(cell.lat_us).p50,
               Percentiles(cell.lat_us).p99, (long long)cell.retries,
               cell.errors ? " ERRORS" : "");
  return cell;
}

template <class Init, class Step>
void Bench::Workers(Cell& cell, int threads, Init&& init, Step&& step) {
  std::vector<std::thread> pool;
  std::vector<std::vector<double>> lat(threads);
  std::vector<std::int64_t> retries(threads, 0), errors(threads, 0), warm(threads, 0);
  const std::uint64_t seed = 0x5eed + 1000003ULL * ++cell_seq_ + (std::uint64_t)getpid() * 31;
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::atomic<bool> stop{false};
  std::mutex note_mutex;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      // A fresh seed per cell: the always-new-key workload must never meet
      // a key an earlier cell created.
      std::mt19937_64 rng(seed + t * 7919);
      auto state = init(t);
      try {
        // One warm-up transaction opens the connection and prepares the
        // statements (pgbench also excludes connection time).
        step(*state, rng, retries[t]);
        ++warm[t];
      } catch (const std::exception& e) {
        ++errors[t];
        std::lock_guard l(note_mutex);
        cell.note = e.what();
      }
      ++ready;
      while (!go) std::this_thread::yield();
      lat[t].reserve(1 << 16);
      while (!stop) {
        const auto t0 = Clock::now();
        try {
          step(*state, rng, retries[t]);
        } catch (const std::exception& e) {
          ++errors[t];
          std::lock_guard l(note_mutex);
          cell.note = e.what();
          continue;
        }
        lat[t].push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
      }
    });
  }
  while (ready < threads) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const auto t0 = Clock::now();
  go = true;
  std::this_thread::sleep_for(std::chrono::duration<double>(o_.duration));
  stop = true;
  for (auto& th : pool) th.join();
  cell.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  for (int t = 0; t < threads; ++t) {
    cell.tx += lat[t].size();
    cell.lat_us.insert(cell.lat_us.end(), lat[t].begin(), lat[t].end());
    cell.retries += retries[t];
    cell.errors += errors[t];
    cell.extra_tx += warm[t];
  }
}

std::string KeyFor(const std::string& w, std::mt19937_64& rng, int keys) {
  if (w == "hot") return "1";
  if (w == "new") return std::to_string(std::uniform_int_distribution<std::int64_t>(1, 1000000000000000LL)(rng));
  return std::to_string(std::uniform_int_distribution<int>(1, keys)(rng));
}

// The library, used the way an application would.
Cell Bench::RunLibrary(const std::string& w, int threads, const std::string& topic_name) {
  const std::string app = "bench-lib";
  const std::string tn = topic_name.empty() ? w : topic_name;
  return Measure(tn, "library", threads, app, [&](Cell& cell) {
    Client client = Client::Connect("", ClientOptions{o_.schema, threads, app});
    auto topic = client.Topic<Counter>(tn);
    auto producer = topic.RegisterProducer();
    const int keys = o_.keys;
    struct S {};
    Workers(cell, threads, [](int) { return std::make_unique<S>(); },
            [&](S&, std::mt19937_64& rng, std::int64_t& retries) {
              const std::string key = KeyFor(w, rng, keys);
              if (w == "inc" || w == "hot") {
                for (;;) {
                  try {
                    client.InTransaction([&](Tx& tx) {
                      auto head = topic.Key(key).LockCompactionHead(tx);
                      Counter next{head ? head->message.value + 1 : 1};
                      producer.ProduceInTx(tx, next, ProduceOptions{key, CompactionOptions{0}});
                    });
                    return;
                  } catch (const compaction::RetryableError&) {
                    ++retries;
                  }
                }
              } else if (w == "new") {
                client.InTransaction([&](Tx& tx) { topic.Key(key).LockCompactionHead(tx); });
              } else if (w == "read") {
                if (!topic.Key(key).CompactionHead()) throw std::runtime_error("read: no head");
              } else if (w == "produce") {
                producer.Produce(Counter{1}, ProduceOptions{key, CompactionOptions{0}});
              }
            });
  }, topic_name.empty());
}

std::string Slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string ReplaceAll(std::string s, const std::string& from, const std::string& to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) {
    s.replace(at, from.size(), to);
  }
  return s;
}

// The library's SQL for this workload, run by pgbench -M prepared.
Cell Bench::RunPgbench(const std::string& w, int threads) {
  const std::string app = "bench-pgbench";
  const std::string script = (w == "inc" || w == "hot") ? "inc" : w;
  auto render = [&](const std::string& name) {
    std::string s = Slurp(fs::path(o_.scripts) / (name + ".sql"));
    s = ReplaceAll(s, "{schema}", q_);
    s = ReplaceAll(s, "{head}", Head(w));
    s = ReplaceAll(s, "{message}", Msg(w));
    s = ReplaceAll(s, "{pkey}", Pkey(w));
    const fs::path out = fs::path(o_.out) / "pgbench" / (w + "_" + name + ".sql");
    fs::create_directories(out.parent_path());
    std::ofstream(out) << s;
    return out.string();
  };
  std::string files = "-f " + render(script);
  return Measure(w, "pgbench", threads, app, [&](Cell& cell) {
    const fs::path logdir = fs::path(o_.out) / "pgbench" / "log";
    fs::remove_all(logdir);
    fs::create_directories(logdir);
    const std::string cmd =
        "PGAPPNAME=" + app + " " + o_.pgbench + " -n -M prepared -c " + std::to_string(threads) +
        " -j " + std::to_string(threads) + " -T " +
        std::to_string(std::max(1, (int)std::lround(o_.duration))) +
        " -D topic=" + w + " -D sv=1 -D rank=0 -D 'payload={\"value\": 1}' -D nkeys=" +
        std::to_string(w == "hot" ? 1 : o_.keys) + " -l --log-prefix=" + (logdir / "tx").string() +
        " " + files + " 2>&1";
    FILE* p = popen(cmd.c_str(), "r");
    std::string out;
    char buf[4096];
    while (size_t n = fread(buf, 1, sizeof buf, p)) out.append(buf, n);
    const int rc = pclose(p);
    std::smatch m;
    double tps = 0;
    if (std::regex_search(out, m, std::regex(R"(tps = ([0-9.]+) \(without initial connection time\))"))) tps = std::stod(m[1]);
    if (std::regex_search(out, m, std::regex(R"(number of transactions actually processed: ([0-9]+))"))) cell.tx = std::stoll(m[1]);
    if (std::regex_search(out, m, std::regex(R"(number of failed transactions: ([0-9]+))"))) cell.errors += std::stoll(m[1]);
    cell.seconds = tps > 0 ? cell.tx / tps : o_.duration;
    if (rc != 0 || tps == 0) {
      ++cell.errors;
      cell.note = "pgbench failed: " + out.substr(0, 600);
    }
    for (auto& f : fs::directory_iterator(logdir)) {
      std::ifstream in(f.path());
      long client, txno, script_no, epoch, us;
      double lat;
      while (in >> client >> txno >> lat >> script_no >> epoch >> us) cell.lat_us.push_back(lat);
    }
    fs::remove_all(logdir);  // per-transaction logs are large; the cell keeps the latencies
  });
}

// The rejected designs, written here the way an application would.
Cell Bench::RunRejected(const std::string& w, const std::string& design, int threads) {
  const std::string app = "bench-" + design;
  const std::string head = Head(w), msg = Msg(w), pkey = Pkey(w);
  const std::string cols =
      "m.id, m.message_key, m.schema_version, m.compaction_rank, "
      "(extract(epoch FROM m.created_at) * 1000000)::bigint, m.payload::text";
  const std::string resolve = "SELECT t.id, t.name, t.headless_ttl_ms, v.version FROM " + q_ +
                              ".topic t LEFT JOIN " + q_ +
                              ".schema_version v ON v.topic_id = t.id WHERE t.name = $1";
  const std::string read = "SELECT h.head_id, " + cols + " FROM " + head + " h LEFT JOIN " + msg +
                           " m ON m.id = h.head_id WHERE h.message_key = $1";
  const std::string by_id = "SELECT " + cols + " FROM " + msg + " m WHERE m.id = $1";
  const std::string produce =
      "WITH m AS (INSERT INTO " + msg +
      " (message_key, schema_version, compaction_rank, payload) VALUES ($1, $2, $4, $3::jsonb) "
      "RETURNING id, created_at), h AS (INSERT INTO " + head +
      " AS h (message_key, head_id, schema_version, compaction_rank, created_at, updated_at, "
      "idle_since) SELECT $1, m.id, $2, $4, statement_timestamp(), statement_timestamp(), NULL "
      "FROM m ON CONFLICT ON CONSTRAINT " + pkey +
      " DO UPDATE SET head_id = excluded.head_id, schema_version = excluded.schema_version, "
      "compaction_rank = excluded.compaction_rank, updated_at = excluded.updated_at, "
      "idle_since = NULL WHERE h.head_id IS NULL OR (excluded.schema_version, "
      "excluded.compaction_rank, excluded.head_id) > (h.schema_version, h.compaction_rank, "
      "h.head_id) RETURNING h.head_id) SELECT m.id, EXISTS (SELECT 1 FROM h) FROM m";
  // Conditional write: the head moves only if it is still the version read.
  const std::string cond =
      "WITH m AS (INSERT INTO " + msg +
      " (message_key, schema_version, compaction_rank, payload) VALUES ($1, $2, $4, $3::jsonb) "
      "RETURNING id), h AS (UPDATE " + head +
      " h SET head_id = m.id, schema_version = $2, compaction_rank = $4, "
      "updated_at = statement_timestamp(), idle_since = NULL FROM m WHERE h.message_key = $1 "
      "AND h.head_id = $5 RETURNING h.head_id) SELECT m.id, EXISTS (SELECT 1 FROM h) FROM m";
  // Ensure-and-lock in one statement: ON CONFLICT DO UPDATE locks the row but
  // writes a new row version every time.
  const std::string upsert_lock =
      "WITH h AS (INSERT INTO " + head +
      " AS h (message_key, created_at, updated_at, idle_since) VALUES ($1, "
      "statement_timestamp(), statement_timestamp(), statement_timestamp()) ON CONFLICT ON "
      "CONSTRAINT " + pkey +
      " DO UPDATE SET updated_at = CASE WHEN h.head_id IS NULL THEN excluded.updated_at ELSE "
      "h.updated_at END, idle_since = CASE WHEN h.head_id IS NULL THEN excluded.idle_since "
      "ELSE NULL END RETURNING h.head_id) SELECT h.head_id, " + cols +
      " FROM h LEFT JOIN " + msg + " m ON m.id = h.head_id";
  return Measure(w, design, threads, app, [&](Cell& cell) {
    const int keys = o_.keys;
    Workers(
        cell, threads,
        [&](int) {
          auto c = std::make_unique<Conn>(app);
          c->Prepare("resolve", resolve);
          c->Prepare("read", read);
          c->Prepare("by_id", by_id);
          c->Prepare("produce", produce);
          c->Prepare("cond", cond);
          c->Prepare("upsert_lock", upsert_lock);
          c->Prepare("adv", "SELECT pg_advisory_xact_lock($1::int, hashtext($2))");
          return c;
        },
        [&](Conn& c, std::mt19937_64& rng, std::int64_t& retries) {
          const std::string key = KeyFor(w, rng, keys);
          auto value_of = [&](PGresult* r, int col) -> std::int64_t {
            if (PQgetisnull(r, 0, col)) return 0;
            return nlohmann::json::parse(PQgetvalue(r, 0, col)).at("value").get<std::int64_t>();
          };
          for (;;) {
            try {
              c.Exec(design == "serializable" ? "BEGIN ISOLATION LEVEL SERIALIZABLE" : "BEGIN");
              Res t = c.Run("resolve", {w});
              const std::string tid = PQgetvalue(t.get(), 0, 0);
              std::int64_t value = 0;
              std::string expected;
              if (design == "advisory") {
                c.Run("adv", {tid, key});
                Res h = c.Run("read", {key});  // new snapshot: after the lock
                if (PQntuples(h.get())) value = value_of(h.get(), 6);
              } else if (design == "serializable" || design == "conditional") {
                Res h = c.Run("read", {key});
                if (PQntuples(h.get())) {
                  value = value_of(h.get(), 6);
                  expected = PQgetvalue(h.get(), 0, 0);
                }
              } else if (design == "upsert-lock") {
                Res h = c.Run("upsert_lock", {key});
                if (!PQgetisnull(h.get(), 0, 0)) {
                  if (!PQgetisnull(h.get(), 0, 1) &&
                      std::string(PQgetvalue(h.get(), 0, 0)) == PQgetvalue(h.get(), 0, 1)) {
                    value = value_of(h.get(), 6);
                  } else {  // waited: the head moved after our snapshot
                    Res m = c.Run("by_id", {PQgetvalue(h.get(), 0, 0)});
                    value = value_of(m.get(), 5);
                  }
                }
              }
              const std::string payload = nlohmann::json{{"value", value + 1}}.dump();
              if (design == "conditional") {
                Res r = c.Run("cond", {key, "1", payload, "0", expected});
                if (std::string(PQgetvalue(r.get(), 0, 1)) != "t") {
                  c.Exec("ROLLBACK");
                  ++retries;
                  continue;
                }
              } else {
                c.Run("produce", {key, "1", payload, "0"});
              }
              c.Exec("COMMIT");
              return;
            } catch (const PgError& e) {
              if (PQtransactionStatus(c.get()) != PQTRANS_IDLE) Res(PQexec(c.get(), "ROLLBACK"));
              if (e.sqlstate == "40001" || e.sqlstate == "40P01") {
                ++retries;
                continue;
              }
              throw;
            }
          }
        });
  });
}

void Bench::ThroughputSection() {
  std::vector<std::string> workloads = {"inc", "hot", "new", "read", "produce"};
  const std::vector<std::string> rejected = {"advisory", "serializable", "conditional", "upsert-lock"};
  for (const auto& w : workloads) {
    if (!o_.only.empty() && !o_.only.count(w)) continue;
    std::fprintf(stderr, "workload %s\n", w.c_str());
    for (int threads : o_.threads) {
      for (int round = 0; round < o_.rounds; ++round) {
        std::vector<std::string> order = {"library", "pgbench"};
        if (w == "inc" || w == "hot") order.insert(order.end(), rejected.begin(), rejected.end());
        // Alternate: the library runs first in even rounds, last in odd ones.
        if (round % 2 == 1) std::reverse(order.begin(), order.end());
        for (const auto& v : order) {
          if (!o_.variants.empty() && !o_.variants.count(v)) continue;
          Cell c;
          if (v == "library") c = RunLibrary(w, threads);
          else if (v == "pgbench") c = RunPgbench(w, threads);
          else c = RunRejected(w, v, threads);
          c.round = round;
          cells_.push_back(std::move(c));
        }
      }
    }
  }
}

// Runs each workload briefly through the library and through pgbench with
// pg_stat_statements reset in between, and compares the statement texts
// (parameter numbers and transaction control aside).
void Bench::SqlCheck() {
  if (!pgss_) {
    sqlcheck_md_.push_back("pg_stat_statements is not preloaded on this server: SQL identity check skipped.");
    return;
  }
  const double saved = o_.duration;
  o_.duration = 0.5;
  auto texts = [&]() {
    std::map<std::string, std::int64_t> out;
    Res r = mon_.Exec("SELECT query, calls FROM pg_stat_statements WHERE query LIKE '%' || $1 || '%' "
                      "AND query NOT LIKE '%pg_stat_%' AND query NOT LIKE 'VACUUM%'", {q_});
    for (int i = 0; i < PQntuples(r.get()); ++i) {
      std::string s = std::regex_replace(std::string(PQgetvalue(r.get(), i, 0)), std::regex(R"(\$[0-9]+)"), "$?");
      s = std::regex_replace(s, std::regex(R"(/\*[^*]*\*/)"), "");  // marker comments
      s = std::regex_replace(s, std::regex(R"(\s+)"), " ");
      s = std::regex_replace(s, std::regex(R"(^ | $)"), "");
      out[s] += std::stoll(PQgetvalue(r.get(), i, 1));
    }
    return out;
  };
  sqlcheck_md_.push_back("| workload | statements per tx (library) | statements per tx (pgbench) | identical | library calls of its most frequent statement | library statements run once per client/connection only |");
  sqlcheck_md_.push_back("|---|---|---|---|---|---|");
  for (const std::string w : {"inc", "new", "read", "produce"}) {
    mon_.Exec("SELECT pg_stat_statements_reset()");
    RunLibrary(w, 1);
    auto lib = texts();
    mon_.Exec("SELECT pg_stat_statements_reset()");
    RunPgbench(w, 1);
    auto pgb = texts();
    // Statements run once per client or connection (the schema version
    // check of Client::Connect, the first topic resolution that fills the
    // cache) are not part of the transaction shape: compare the statements
    // that run at least once per 20 transactions.
    auto per_tx = [](const std::map<std::string, std::int64_t>& m, std::set<std::string>& out,
                     std::vector<std::string>& setup) {
      std::int64_t top = 0;
      for (auto& [k, v] : m) top = std::max(top, v);
      for (auto& [k, v] : m) {
        if (v * 20 >= top) out.insert(k);
        else setup.push_back(k.substr(0, 90) + " (" + std::to_string(v) + " calls)");
      }
      return top;
    };
    std::set<std::string> a, b;
    std::vector<std::string> setup_a, setup_b;
    const std::int64_t top_a = per_tx(lib, a, setup_a);
    per_tx(pgb, b, setup_b);
    const bool same = a == b;
    std::string setup;
    for (auto& x : setup_a) setup += (setup.empty() ? "" : "; ") + x;
    sqlcheck_md_.push_back("| " + w + " | " + std::to_string(a.size()) + " | " + std::to_string(b.size()) +
                           " | " + (same ? "yes" : "**NO**") + " | " + std::to_string(top_a) + " | " +
                           (setup.empty() ? "-" : "`" + setup + "`") + " |");
    if (!same) {
      errors_.push_back("SQL check " + w + ": the pgbench script no longer matches the library's SQL");
      for (auto& s : a) if (!b.count(s)) sqlcheck_md_.push_back("|  | only library: `" + s.substr(0, 200) + "` | | | | |");
      for (auto& s : b) if (!a.count(s)) sqlcheck_md_.push_back("|  | | only pgbench: `" + s.substr(0, 200) + "` | | | |");
    }
  }
  o_.duration = saved;
  cells_.clear();  // the check cells are not results
}

// ---------------------------------------------------------------- janitor
void Bench::InsertHeadless(const std::string& topic, long from, long n, bool expired) {
  // Spread idle_since over ten minutes in random order, as keys locked at
  // different times would be.
  mon_.Exec("SELECT setseed(0.5)");
  mon_.Exec("INSERT INTO " + Head(topic) +
            " (message_key, created_at, updated_at, idle_since) SELECT 'h' || i, t, t, t FROM "
            "generate_series(" + std::to_string(from) + ", " + std::to_string(from + n - 1) +
            ") i, LATERAL (SELECT now() - interval '" + (expired ? "1 hour" : "0 s") +
            "' - random() * interval '10 minutes' + (i * 0) * interval '1 s' AS t) x");
}

std::string Fmt(double v, int prec = 0) {
  char b[64];
  std::snprintf(b, sizeof b, "%.*f", prec, v);
  return b;
}

void Bench::JanitorSection() {
  const std::string topic = "jan";
  Client client = Client::Connect("", ClientOptions{o_.schema, 2, "bench-janitor"});
  compaction::TopicConfig config;
  config.headless_ttl = std::chrono::minutes(1);
  client.Topic<Counter>(topic).Register(config);
  const long n = o_.janitor_rows;
  janitor_md_.push_back("Sweep of " + std::to_string(n) +
                        " expired headless rows (idle_since spread over 10 minutes, random heap order, "
                        "table VACUUM ANALYZEd after loading, as autovacuum would):");
  janitor_md_.push_back("");
  janitor_md_.push_back("| method | rows | seconds | rows/s | ratio to unbounded DELETE | batches | WAL bytes/row |");
  janitor_md_.push_back("|---|---|---|---|---|---|---|");
  double unbounded_rate = 0;
  std::vector<int> batches = {0, 10000, 1000, 100};  // 0 = one unbounded DELETE
  for (int b : batches) {
    mon_.Exec("TRUNCATE " + Head(topic));
    const auto l0 = Clock::now();
    InsertHeadless(topic, 1, n, true);
    mon_.Exec("VACUUM ANALYZE " + Head(topic));
    const double load_s = std::chrono::duration<double>(Clock::now() - l0).count();
    const std::int64_t wal0 = Snapshot().wal;
    const auto t0 = Clock::now();
    std::int64_t deleted = 0;
    int nb = 0;
    bool capped = false;
    if (b == 0) {
      Res r = mon_.Exec("DELETE FROM " + Head(topic) +
                        " WHERE head_id IS NULL AND updated_at < now() - (SELECT headless_ttl_ms FROM " +
                        q_ + ".topic WHERE name = $1) * interval '1 millisecond'", {topic});
      deleted = std::stoll(PQcmdTuples(r.get()));
      nb = 1;
    } else {
      compaction::Janitor janitor(client);
      compaction::SweepOptions so;
      so.batch_size = b;
      so.max_batches = 1000000;
      so.statement_timeout = std::chrono::minutes(5);
      // One sweep per max_batches; a time cap keeps the whole run bounded
      // (the figure is then the rate over the part that ran).
      so.max_batches = std::max(1, 20000 / b);
      while (deleted < n) {
        auto r = janitor.SweepHeadless(topic, so);
        deleted += r.deleted;
        nb += r.batches;
        if (r.deleted == 0) break;
        if (deleted < n && std::chrono::duration<double>(Clock::now() - t0).count() > o_.janitor_cap) {
          capped = true;
          break;
        }
      }
    }
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    const std::int64_t wal = Snapshot().wal - wal0;
    const double rate = deleted / s;
    if (b == 0) unbounded_rate = rate;
    if (deleted != n && !capped) errors_.push_back("janitor batch " + std::to_string(b) + " deleted " + std::to_string(deleted) + " of " + std::to_string(n));
    janitor_md_.push_back("| " + (b == 0 ? std::string("one unbounded DELETE") : "SweepHeadless batch " + std::to_string(b)) +
                          " | " + std::to_string(deleted) + (capped ? " (time cap: stopped)" : "") + " | " + Fmt(s, 2) + " | " + Fmt(rate) + " | " +
                          Fmt(unbounded_rate > 0 ? rate / unbounded_rate : 0, 2) + " | " + std::to_string(nb) +
                          " | " + Fmt((double)wal / std::max<std::int64_t>(deleted, 1), 1) + " |");
    std::fprintf(stderr, "  janitor batch %d: %lld rows in %.2f s (%.0f rows/s; load %.1f s)\n", b,
                 (long long)deleted, s, rate, load_s);
  }

  // Lockers on live keys with and without a concurrent sweep.
  mon_.Exec("TRUNCATE " + Head(topic) + ", " + Msg(topic));
  Populate(topic, o_.keys);
  InsertHeadless(topic, 1, n, true);
  mon_.Exec("VACUUM ANALYZE " + Head(topic));
  const int threads = o_.short_mode ? 4 : 16;
  janitor_md_.push_back("");
  janitor_md_.push_back("Lockers: " + std::to_string(threads) +
                        " threads, LockCompactionHead + ProduceInTx + commit on " + std::to_string(o_.keys) +
                        " live (materialized) keys of the same topic, " + Fmt(o_.duration, 1) +
                        " s per phase, phases alternating; during a sweep phase SweepHeadless(batch 1000) runs "
                        "in a loop on the same table, unpaced (batch_pause 0, the library default), paced by a "
                        "fixed batch_pause of 10 ms, or by a duty_cycle on top of it (the pause after each batch at "
                        "least its duration x (1 - duty_cycle) / duty_cycle). Before every phase the table is topped "
                        "up to " + std::to_string(n) + " expired headless rows and vacuumed:");
  janitor_md_.push_back("");
  janitor_md_.push_back("| phase | tx/s | p50 us | p99 us | p99 vs the no-sweep phase before | rows swept during phase |");
  janitor_md_.push_back("|---|---|---|---|---|---|");
  // Each sweep phase follows a no-sweep phase, its baseline; the cycle runs
  // twice, since p99 moves between phases on a shared machine.
  struct Phase {
    bool sweep;
    std::chrono::milliseconds pause;
    double duty_cycle;
  };
  const Phase kNone{false, {}, 1.0};
  const std::vector<Phase> kCycle = {{true, std::chrono::milliseconds(0), 1.0},
                                     {true, std::chrono::milliseconds(10), 1.0},
                                     {true, std::chrono::milliseconds(10), 0.5},
                                     {true, std::chrono::milliseconds(10), 0.1}};
  std::vector<Phase> phases;
  for (int cycle = 0; cycle < 2; ++cycle) {
    for (const Phase& p : kCycle) {
      phases.push_back(kNone);
      phases.push_back(p);
    }
  }
  double base_p99 = 0;
  std::map<std::string, std::pair<std::vector<std::string>, double>> ratios_by_kind;
  long next_key = n + 1;
  std::int64_t to_refill = 0;
  for (const Phase& phase : phases) {
    if (to_refill > 0) InsertHeadless(topic, next_key, to_refill, true);
    next_key += to_refill;
    to_refill = 0;
    mon_.Exec("VACUUM ANALYZE " + Head(topic));
    std::atomic<bool> done{false};
    std::atomic<std::int64_t> swept{0};
    std::thread sweeper;
    if (phase.sweep) {
      sweeper = std::thread([&] {
        compaction::Janitor janitor(client);
        compaction::SweepOptions so;
        so.batch_size = 1000;
        so.max_batches = 20;  // short sweeps, so `done` is seen promptly
        so.batch_pause = phase.pause;
        so.duty_cycle = phase.duty_cycle;
        while (!done) {
          auto r = janitor.SweepHeadless(topic, so);
          swept += r.deleted;
          if (r.deleted == 0) break;
        }
      });
    }
    Cell cell = RunLibrary("inc", threads, topic);
    done = true;
    if (sweeper.joinable()) sweeper.join();
    to_refill = swept.load();
    const Dist d = Percentiles(cell.lat_us);
    std::string name = "no sweep";
    if (phase.sweep) {
      name = phase.pause.count() == 0 ? "sweep, unpaced"
                                      : "sweep, batch_pause " + std::to_string(phase.pause.count()) + " ms";
      if (phase.duty_cycle < 1.0) name += ", duty_cycle " + Fmt(phase.duty_cycle, 1);
    }
    janitor_md_.push_back("| " + name + " | " + Fmt(cell.tx / cell.seconds) + " | " + Fmt(d.p50) + " | " +
                          Fmt(d.p99) + " | " + (phase.sweep && base_p99 > 0 ? Fmt(d.p99 / base_p99, 2) : "-") +
                          " | " + std::to_string(swept.load()) + " |");
    if (!phase.sweep) base_p99 = d.p99;  // each sweep phase is compared to the phase before it
    if (phase.sweep && base_p99 > 0) {
      auto& r = ratios_by_kind[name];
      r.first.push_back(Fmt(d.p99 / base_p99, 2));
      r.second += swept.load();
    }
  }
  janitor_md_.push_back("");
  janitor_md_.push_back("| sweep phase | p99 vs the no-sweep phase before, each cycle | rows swept per second |");
  janitor_md_.push_back("|---|---|---|");
  for (const auto& [name, r] : ratios_by_kind) {
    std::string joined;
    for (const auto& x : r.first) joined += (joined.empty() ? "" : " / ") + x;
    janitor_md_.push_back("| " + name + " | " + joined + " | " +
                          Fmt(r.second / (o_.duration * r.first.size())) + " |");
  }
}


void Bench::StatsSection() {
  const std::string topic = "stats";
  Client client = Client::Connect("", ClientOptions{o_.schema, 2, "bench-stats"});
  client.Topic<Counter>(topic).Register();
  auto handle = client.Topic<Counter>(topic);
  std::vector<long> sizes = o_.short_mode ? std::vector<long>{1000, 10000}
                                          : std::vector<long>{10000, 100000, 1000000};
  compaction::StatsOptions capped;  // compactiond's stats-exact-count-limit default
  capped.exact_count_limit = 10000;
  const compaction::StatsOptions exact;  // the library default: count every row
  stats_md_.push_back("TopicHandle::Stats() (one round trip over the idle_since partial index plus the "
                      "janitor_state row), " + std::string(o_.short_mode ? "5" : "20") +
                      " calls per cell; `limit` counts exactly up to exact_count_limit = " +
                      std::to_string(capped.exact_count_limit) +
                      " (compactiond's default) and estimates above it (headless_rows_estimated), "
                      "`exact` is the library default (StatsOptions::kCountAll, every headless row):");
  stats_md_.push_back("");
  stats_md_.push_back("| headless rows | state | options | reported | first call ms | p50 ms | max ms | goal <= 50 ms |");
  stats_md_.push_back("|---|---|---|---|---|---|---|---|");
  long have = 0;
  std::string explain;
  const int calls = o_.short_mode ? 5 : 20;
  auto measure = [&](long size, bool vacuumed, bool use_exact) {
    const compaction::StatsOptions& so = use_exact ? exact : capped;
    std::vector<double> ms;
    double first = 0;
    compaction::TopicStats st;
    for (int i = 0; i < calls + 1; ++i) {
      const auto t0 = Clock::now();
      st = handle.Stats(so);
      const double v = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
      const bool over = size > so.exact_count_limit;
      const bool ok = over ? st.headless_rows_estimated && st.headless_rows > so.exact_count_limit
                           : !st.headless_rows_estimated && st.headless_rows == size;
      if (!ok) errors_.push_back("stats: reported " + std::to_string(st.headless_rows) +
                                 (st.headless_rows_estimated ? " (estimated)" : "") + " for " + std::to_string(size));
      if (i == 0) first = v; else ms.push_back(v);
    }
    const Dist d = Percentiles(ms);
    const double mx = *std::max_element(ms.begin(), ms.end());
    stats_md_.push_back("| " + std::to_string(size) + " | " + (vacuumed ? "after VACUUM (visibility map set)" : "just loaded, not vacuumed") +
                        " | " + (use_exact ? "exact" : "limit") + " | " + std::to_string(st.headless_rows) +
                        (st.headless_rows_estimated ? " (estimated)" : "") + " | " + Fmt(first, 1) + " | " +
                        Fmt(d.p50, 1) + " | " + Fmt(mx, 1) + " | " + (d.p50 <= 50 ? "met" : "**missed**") + " |");
    std::fprintf(stderr, "  stats %ld rows %s %s: p50 %.1f ms\n", size, vacuumed ? "vacuumed" : "fresh",
                 use_exact ? "exact" : "limit", d.p50);
  };
  for (long size : sizes) {
    InsertHeadless(topic, have + 1, size - have, false);
    have = size;
    for (int vacuumed = 0; vacuumed < 2; ++vacuumed) {
      if (vacuumed) mon_.Exec("VACUUM ANALYZE " + Head(topic));
      measure(size, vacuumed, false);
      measure(size, vacuumed, true);
    }
  }
  // The library runs its stats statement with enable_seqscan off.
  mon_.Exec("SET enable_seqscan = off");
  Res ex = mon_.Exec("EXPLAIN (ANALYZE, BUFFERS, TIMING OFF) SELECT (SELECT count(*) FROM (SELECT 1 FROM " + Head(topic) +
                     " h WHERE h.idle_since IS NOT NULL LIMIT " + std::to_string(capped.exact_count_limit + 1) +
                     ") c), (SELECT h.idle_since FROM " + Head(topic) +
                     " h WHERE h.idle_since IS NOT NULL ORDER BY h.idle_since LIMIT 1)");
  mon_.Exec("RESET enable_seqscan");
  for (int i = 0; i < PQntuples(ex.get()); ++i) explain += std::string(PQgetvalue(ex.get(), i, 0)) + "\n";
  stats_md_.push_back("");
  stats_md_.push_back("Plan of the capped count and the oldest row, the shape of the library's statement, at " + std::to_string(have) + " rows (vacuumed, enable_seqscan off as in the library):");
  stats_md_.push_back("");
  stats_md_.push_back("```");
  stats_md_.push_back(explain + "```");

  // The daemon's refresh: Client::ListTopicStats over many topics, which is
  // what compactiond's stats cache calls on its timer.
  const int topics = o_.topics;
  const auto r0 = Clock::now();
  for (int i = 0; i < topics; ++i) {
    char name[32];
    std::snprintf(name, sizeof name, "s-%04d", i);
    auto info = client.Topic<Counter>(name).Register();
    mon_.Exec("INSERT INTO " + q_ + ".compaction_head_" + std::to_string(info.id) +
              " (message_key, created_at, updated_at, idle_since) SELECT 'h' || i, now(), now(), now() "
              "FROM generate_series(1, 10) i");
  }
  const double reg_s = std::chrono::duration<double>(Clock::now() - r0).count();
  mon_.Exec("ANALYZE");
  const int total_topics = (int)mon_.Int("SELECT count(*) FROM " + q_ + ".topic");
  std::vector<double> ms;
  for (int i = 0; i < (o_.short_mode ? 2 : 6); ++i) {
    const auto t0 = Clock::now();
    auto all = client.ListTopicStats();
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    if ((int)all.size() != total_topics) errors_.push_back("ListTopicStats returned " + std::to_string(all.size()));
  }
  const double first = ms.front();
  ms.erase(ms.begin());
  const Dist d = Percentiles(ms);
  stats_md_.push_back("");
  stats_md_.push_back("Daemon-side refresh, Client::ListTopicStats() over " + std::to_string(total_topics) +
                      " topics (" + std::to_string(topics) + " with 10 headless rows each; registering them took " +
                      Fmt(reg_s, 1) + " s): first call " + Fmt(first, 1) + " ms (resolves and caches every topic), then p50 " +
                      Fmt(d.p50, 1) + " ms, max " + Fmt(*std::max_element(ms.begin(), ms.end()), 1) + " ms, i.e. " +
                      Fmt(d.p50 * 1000 / total_topics, 0) + " us per topic.");
  std::fprintf(stderr, "  ListTopicStats over %d topics: p50 %.1f ms\n", total_topics, d.p50);
}


struct Agg {
  std::int64_t tx = 0, commits = 0, retries = 0, errors = 0;
  double seconds = 0, client_cpu = 0, server_cpu = 0, client_csw = 0;
  std::vector<double> lat, per_round;
  TableStats d;
};

void Bench::Report() {
  const std::vector<std::string> workloads = {"inc", "hot", "new", "read", "produce"};
  const std::map<std::string, std::string> title = {
      {"inc", "(1) increment: LockCompactionHead + ProduceInTx + commit, 10,000 uniform keys"},
      {"hot", "(2) increment on one hot key"},
      {"new", "(3) lock-only on always-new keys (headless-row creation)"},
      {"read", "(4) plain CompactionHead reads, 10,000 keys"},
      {"produce", "(5) compacted Produce without a lock, 10,000 keys"}};
  const std::vector<std::string> variants = {"library", "pgbench", "advisory", "serializable", "conditional", "upsert-lock"};
  std::map<std::tuple<std::string, std::string, int>, Agg> agg;
  for (auto& c : cells_) {
    Agg& a = agg[{c.workload, c.variant, c.threads}];
    a.tx += c.tx;
    a.commits += c.tx + c.extra_tx;
    a.retries += c.retries;
    a.errors += c.errors;
    a.seconds += c.seconds;
    a.client_cpu += c.client_cpu;
    a.server_cpu += c.server_cpu;
    a.client_csw += c.client_csw;
    a.lat.insert(a.lat.end(), c.lat_us.begin(), c.lat_us.end());
    a.per_round.push_back(c.seconds > 0 ? c.tx / c.seconds : 0);
    a.d.dead += c.delta.dead;
    a.d.upd += c.delta.upd;
    a.d.hot += c.delta.hot;
    a.d.wal += c.delta.wal;
    a.d.ins += c.delta.ins;
    a.d.del += c.delta.del;
  }
  std::ofstream md(fs::path(o_.out) / "report.md");
  md << "### Server settings (printed by the driver)\n\n```\n";
  for (auto& s : settings_) md << s << "\n";
  md << "```\n\n### SQL identity check (pg_stat_statements)\n\n";
  for (auto& s : sqlcheck_md_) md << s << "\n";
  md << "\n### Throughput and latency\n\n"
     << "Each cell: " << Fmt(o_.duration, 1) << " s, " << o_.rounds
     << " rounds alternating the variant order; tx/s = all transactions / all seconds of the rounds; "
        "p50/p99 over every transaction of all rounds; retries, dead tuples (net n_dead_tup growth after HOT pruning), "
        "updates (n_tup_upd, HOT share) and WAL bytes per committed transaction; ratio = tx/s / pgbench tx/s "
        "(per-round ratios in brackets).\n\n";
  std::map<std::string, std::map<int, std::map<std::string, double>>> tput;
  for (auto& w : workloads) {
    bool any = false;
    for (auto& [k, a] : agg) any |= std::get<0>(k) == w;
    if (!any) continue;
    md << "#### " << title.at(w) << "\n\n"
       << "| threads | variant | tx/s | per round | p50 us | p99 us | retries/tx | dead/tx | upd/tx (HOT %) | WAL B/tx | client CPU us/tx | client ctx switches/tx | server CPU us/tx | ratio to pgbench [per round] |\n"
       << "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
    for (int t : o_.threads) {
      auto pit = agg.find({w, "pgbench", t});
      const double pg_tps = pit != agg.end() && pit->second.seconds > 0 ? pit->second.tx / pit->second.seconds : 0;
      for (auto& v : variants) {
        auto it = agg.find({w, v, t});
        if (it == agg.end()) continue;
        const Agg& a = it->second;
        const double tps = a.seconds > 0 ? a.tx / a.seconds : 0;
        tput[w][t][v] = tps;
        const Dist d = Percentiles(a.lat);
        const double n = std::max<std::int64_t>(a.commits, 1);
        std::string rounds;
        std::string rr;
        for (size_t i = 0; i < a.per_round.size(); ++i) {
          rounds += (i ? " / " : "") + Fmt(a.per_round[i]);
          if (pit != agg.end() && i < pit->second.per_round.size() && pit->second.per_round[i] > 0)
            rr += (i ? " / " : "") + Fmt(a.per_round[i] / pit->second.per_round[i], 2);
        }
        md << "| " << t << " | " << v << (a.errors ? " (ERRORS)" : "") << " | " << Fmt(tps) << " | " << rounds << " | "
           << Fmt(d.p50) << " | " << Fmt(d.p99) << " | " << Fmt(a.retries / n, 3) << " | "
           << Fmt(a.d.dead / n, 2) << " | " << Fmt(a.d.upd / n, 2) << " ("
           << Fmt(a.d.upd ? 100.0 * a.d.hot / a.d.upd : 0) << " %) | " << Fmt(a.d.wal / n) << " | " << Fmt(1e6 * a.client_cpu / n, 1) << " | " << Fmt(a.client_csw / n, 2) << " | "
           << Fmt(1e6 * a.server_cpu / n, 1) << " | "
           << (v == "pgbench" || pg_tps == 0 ? std::string("1") : Fmt(tps / pg_tps, 2) + " [" + rr + "]") << " |\n";
      }
    }
    md << "\n";
    std::ofstream dat(fs::path(o_.out) / ("throughput_" + w + ".dat"));
    dat << "threads";
    std::vector<std::string> present;
    for (auto& v : variants) if (tput[w].begin() != tput[w].end() && tput[w].begin()->second.count(v)) present.push_back(v);
    for (auto& v : present) dat << " " << v;
    dat << "\n";
    for (int t : o_.threads) {
      dat << t;
      for (auto& v : present) dat << " " << Fmt(tput[w][t][v]);
      dat << "\n";
    }
  }
  // Lines for the headline table (16 threads, or the largest count run).
  const int top = *std::max_element(o_.threads.begin(), o_.threads.end());
  md << "### Headline ratios at " << top << " threads\n\n| workload | library / pgbench |";
  for (auto& v : {"advisory", "serializable", "conditional", "upsert-lock"}) md << " seed / " << v << " |";
  md << "\n|---|---|---|---|---|---|\n";
  for (auto& w : workloads) {
    if (!tput.count(w)) continue;
    auto& m = tput[w][top];
    // Pooled ratio, then the median of the per-round ratios (each round
    // runs the two back to back, so it is less exposed to load drift).
    std::string med = "-";
    auto li = agg.find({w, "library", top});
    auto pi = agg.find({w, "pgbench", top});
    if (li != agg.end() && pi != agg.end()) {
      std::vector<double> r;
      for (size_t i = 0; i < li->second.per_round.size() && i < pi->second.per_round.size(); ++i)
        if (pi->second.per_round[i] > 0) r.push_back(li->second.per_round[i] / pi->second.per_round[i]);
      if (!r.empty()) {
        std::sort(r.begin(), r.end());
        med = Fmt(r.size() % 2 ? r[r.size() / 2] : (r[r.size() / 2 - 1] + r[r.size() / 2]) / 2, 2);
      }
    }
    md << "| " << w << " | " << (m["pgbench"] > 0 ? Fmt(m["library"] / m["pgbench"], 2) : "-") << " (median of rounds " << med << ") |";
    for (auto& v : {"advisory", "serializable", "conditional", "upsert-lock"})
      md << " " << (m.count(v) && m[v] > 0 ? Fmt(m["library"] / m[v], 2) : "-") << " |";
    md << "\n";
  }
  md << "\n### Janitor\n\n";
  for (auto& s : janitor_md_) md << s << "\n";
  md << "\n### Stats\n\n";
  for (auto& s : stats_md_) md << s << "\n";
  md << "\n### Errors\n\n";
  if (errors_.empty()) md << "none\n";
  for (auto& e : errors_) md << "- " << e << "\n";

  std::ofstream gp(fs::path(o_.out) / "plot.gp");
  gp << "set terminal pngcairo size 1500,900 font ',10'\nset output 'throughput.png'\n"
        "set multiplot layout 2,3 title 'libcompaction vs pgbench (same SQL) vs rejected designs: throughput by client threads'\n"
        "set logscale x 2\nset xtics (1,4,16)\nset xrange [0.8:20]\nset yrange [0:*]\nset key top left font ',8'\n"
        "set grid\nset xlabel 'client threads'\nset ylabel 'tx/s'\n";
  for (auto& w : workloads) {
    if (!tput.count(w)) continue;
    gp << "set title '" << title.at(w) << "' font ',9'\n"
       << "plot for [i=2:*] 'throughput_" << w << ".dat' using 1:i with linespoints lw 2 title columnheader(i)\n";
  }
  gp << "unset multiplot\n";
}

int Bench::Run() {
  fs::create_directories(o_.out);
  const auto t0 = Clock::now();
  PrintSettings();
  Setup();
  auto want = [&](const std::string& s) { return o_.only.empty() || o_.only.count(s); };
  // Each section reports what it has even when a later one fails.
  auto section = [&](const char* name, auto&& fn) {
    try {
      fn();
    } catch (const std::exception& e) {
      errors_.push_back(std::string(name) + " section failed: " + e.what());
      std::fprintf(stderr, "%s section failed: %s\n", name, e.what());
    }
    Report();
  };
  if (want("sqlcheck")) section("sqlcheck", [&] { SqlCheck(); });
  section("throughput", [&] { ThroughputSection(); });
  if (want("janitor")) section("janitor", [&] { JanitorSection(); });
  if (want("stats")) section("stats", [&] { StatsSection(); });
  if (o_.short_mode) mon_.Exec("DROP SCHEMA IF EXISTS " + q_ + " CASCADE");
  std::fprintf(stderr, "done in %.0f s; report: %s/report.md\n",
               std::chrono::duration<double>(Clock::now() - t0).count(), o_.out.c_str());
  for (auto& e : errors_) std::fprintf(stderr, "ERROR: %s\n", e.c_str());
  return errors_.empty() && total_errors_ == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  o.scripts = fs::path(__FILE__).parent_path() / "pgbench";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) { std::fprintf(stderr, "%s needs a value\n", a.c_str()); std::exit(2); }
      return argv[++i];
    };
    if (a == "--short") {
      o.short_mode = true;
      o.duration = 0.25;
      o.rounds = 1;
      o.threads = {1, 4};
      o.janitor_rows = 10000;
      o.topics = 20;
      o.keys = 1000;
    } else if (a == "--out") o.out = next();
    else if (a == "--duration") o.duration = std::stod(next());
    else if (a == "--rounds") o.rounds = std::stoi(next());
    else if (a == "--threads") o.threads = ParseInts(next());
    else if (a == "--janitor-rows") o.janitor_rows = std::stol(next());
    else if (a == "--topics") o.topics = std::stoi(next());
    else if (a == "--janitor-cap") o.janitor_cap = std::stod(next());
    else if (a == "--pgbench") o.pgbench = next();
    else if (a == "--scripts") o.scripts = next();
    else if (a == "--only") {
      std::stringstream ss(next());
      for (std::string x; std::getline(ss, x, ',');) o.only.insert(x);
    } else if (a == "--variants") {
      std::stringstream ss(next());
      for (std::string x; std::getline(ss, x, ',');) o.variants.insert(x);
    } else {
      std::fprintf(stderr, "usage: %s [--short] [--out DIR] [--duration S] [--rounds N] [--threads 1,4,16] "
                           "[--janitor-rows N] [--janitor-cap S] [--topics N] [--pgbench PATH] [--scripts DIR] [--only LIST] "
                           "[--variants library,pgbench,advisory,serializable,conditional,upsert-lock]\n", argv[0]);
      return 2;
    }
  }
  try {
    Bench b(o);
    return b.Run();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "compaction_bench: %s\n", e.what());
    return 1;
  }
}
