// compaction_bench: throughput/latency of libcompaction's lock, produce,
// read, janitor and stats paths against pgbench running the library's own
// SQL and against the designs the row-lock protocol was chosen over
// (doc/architecture.md; implemented here only).
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
#include <condition_variable>
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
#include <tuple>
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
void from_json(const nlohmann::json& j, Counter& c) {
  j.at("value").get_to(c.value);
}

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
  std::set<std::string> only;      // empty: everything
  std::set<std::string> variants;  // empty: every variant
  std::set<std::string> skip;      // sections left out (e.g. the smoke's "log")
  std::string schema;
  int keys = 10000;
  // Batches (section "batch"): messages per ProduceBatch, thread counts.
  int batch = 100;
  std::vector<int> batch_threads = {1};
  // Log compaction (section "log"; RESULTS.md, run H-log).
  double log_seconds = 70;       // storage-bound run
  double log_retention_s = 10;   // its retention
  int log_rate = 500;            // messages/s per topic in that run
  int log_keys = 1000;           // keys in that run
  double log_phase = 5;          // cleaner vs no-cleaner phase length
  int log_cycles = 4;            // phase pairs per workload
  int log_threads = 16;          // client threads in those phases
  long log_removable = 1000000;  // delete-rate data
  int log_delete_rounds = 3;
  double log_delete_cap = 60;  // seconds per cleaner method
  std::vector<long> log_heads = {100000, 1000000, 10000000};  // idle-pass sizes
};

std::vector<int> ParseInts(const std::string& s) {
  std::vector<int> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');)
    out.push_back(std::stoi(item));
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
    PQsetNoticeProcessor(
        c_, [](void*, const char*) {}, nullptr);
  }
  ~Conn() { PQfinish(c_); }
  Conn(const Conn&) = delete;
  Conn& operator=(const Conn&) = delete;

  Res Exec(const std::string& sql,
           const std::vector<std::string>& params = {}) {
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
  // Prepared statements sent in one pipeline with one Sync: one round trip,
  // as the library sends a transaction's BEGIN with its first statements.
  // Every statement's result is checked; on an error the transaction, if
  // one was left open, is rolled back before the throw.
  struct Call {
    std::string name;
    std::vector<std::string> params;
  };
  std::vector<Res> Pipeline(const std::vector<Call>& calls) {
    if (!PQenterPipelineMode(c_)) throw std::runtime_error(PQerrorMessage(c_));
    for (const Call& call : calls) {
      std::vector<const char*> p;
      for (auto& s : call.params) p.push_back(s.c_str());
      if (!PQsendQueryPrepared(c_, call.name.c_str(), (int)p.size(), p.data(),
                               nullptr, nullptr, 0)) {
        throw std::runtime_error(PQerrorMessage(c_));
      }
    }
    if (!PQpipelineSync(c_)) throw std::runtime_error(PQerrorMessage(c_));
    std::vector<Res> results;
    for (size_t i = 0; i < calls.size(); ++i) {
      results.emplace_back(PQgetResult(c_));
      Res end(PQgetResult(c_));  // null: the statement's end
    }
    Res sync(PQgetResult(c_));
    const bool synced = PQresultStatus(sync.get()) == PGRES_PIPELINE_SYNC;
    PQexitPipelineMode(c_);
    for (size_t i = 0; i < calls.size(); ++i) {
      const auto st = PQresultStatus(results[i].get());
      if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK) continue;
      const char* state =
          PQresultErrorField(results[i].get(), PG_DIAG_SQLSTATE);
      const std::string msg =
          std::string(PQresultErrorMessage(results[i].get())) +
          " in pipeline: " + calls[i].name;
      if (PQtransactionStatus(c_) == PQTRANS_INERROR)
        Res(PQexec(c_, "ROLLBACK"));
      throw PgError(state ? state : "", msg);
    }
    if (!synced) throw std::runtime_error("pipeline: no sync result");
    return results;
  }
  std::string Value(const std::string& sql,
                    const std::vector<std::string>& params = {}) {
    Res r = Exec(sql, params);
    return PQntuples(r.get()) ? PQgetvalue(r.get(), 0, 0) : "";
  }
  std::int64_t Int(const std::string& sql,
                   const std::vector<std::string>& params = {}) {
    return std::stoll(Value(sql, params));
  }
  PGconn* get() { return c_; }

 private:
  void Check(PGresult* r, const std::string& what) {
    const auto st = PQresultStatus(r);
    if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK) return;
    const char* state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
    throw PgError(state ? state : "", std::string(PQerrorMessage(c_)) +
                                          " in: " + what.substr(0, 120));
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
  auto at = [&](double q) {
    return v[std::min(v.size() - 1, (size_t)(q * v.size()))];
  };
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

// The fields of /proc/PID/stat after the process name: [0] is field 3
// (state), so field N is [N - 3]. Empty when the process is gone.
std::vector<std::string> ProcStat(const std::string& pid) {
  std::ifstream in("/proc/" + pid + "/stat");
  std::string line;
  std::getline(in, line);
  const size_t close = line.rfind(')');
  std::vector<std::string> f;
  if (close == std::string::npos) return f;
  std::stringstream ss(line.substr(close + 2));
  for (std::string x; ss >> x;) f.push_back(x);
  return f;
}

// Fields `a` + `b` of /proc/PID/stat (clock ticks) in seconds; 0 when the
// process is gone.
double ProcStatSeconds(const std::string& pid, size_t a, size_t b) {
  const std::vector<std::string> f = ProcStat(pid);
  if (f.size() <= b - 3) return 0;
  return (std::stod(f[a - 3]) + std::stod(f[b - 3])) / sysconf(_SC_CLK_TCK);
}

Cpu ReadCpu(int postmaster) {
  Cpu c;
  rusage r{};
  getrusage(RUSAGE_SELF, &r);
  c.self = Seconds(r.ru_utime) + Seconds(r.ru_stime);
  c.csw = r.ru_nvcsw + r.ru_nivcsw;
  getrusage(RUSAGE_CHILDREN, &r);
  c.children = Seconds(r.ru_utime) + Seconds(r.ru_stime);
  c.csw += r.ru_nvcsw + r.ru_nivcsw;
  // cutime and cstime: the postmaster's reaped children, its backends.
  if (postmaster > 0)
    c.server = ProcStatSeconds(std::to_string(postmaster), 16, 17);
  return c;
}

int ParentOf(int pid) {
  const std::vector<std::string> f = ProcStat(std::to_string(pid));
  return f.size() > 1 ? std::stoi(f[1]) : 0;  // field 4
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
// How RunLibrary's client is set up. kUnnamed: prepared_statements =
// false (variant "library-unnamed", issue 15's run P). kNoCommitCheck:
// commit_check_timeout = 0 ("library-nocheck"), so a commit gets no flush
// request ahead of it (lib/src/pg/exec.hpp ResultFirst).
enum class LibraryForm { kDefault, kUnnamed, kNoCommitCheck };

const char* LibraryVariant(LibraryForm form) {
  switch (form) {
    case LibraryForm::kUnnamed:
      return "library-unnamed";
    case LibraryForm::kNoCommitCheck:
      return "library-nocheck";
    case LibraryForm::kDefault:
      break;
  }
  return "library";
}

class Bench {
 public:
  explicit Bench(Options o) : o_(std::move(o)), mon_("bench-monitor") {}

  int Run();

 private:
  // setup
  void Setup();
  std::int64_t TopicId(const std::string& name);
  std::string Head(const std::string& t) {
    return q_ + ".compaction_head_" + std::to_string(TopicId(t));
  }
  std::string Msg(const std::string& t) {
    return q_ + ".message_" + std::to_string(TopicId(t));
  }
  std::string Pkey(const std::string& t) {
    return "compaction_head_" + std::to_string(TopicId(t)) + "_pkey";
  }
  void Populate(const std::string& topic, int nkeys);
  void PrintSettings();

  // measurement
  TableStats Snapshot();
  void WaitGone(const std::string& app);
  Cell Measure(const std::string& workload, const std::string& variant,
               int threads, const std::string& app,
               const std::function<void(Cell&)>& body, bool vacuum = true,
               const std::function<double()>& prepare = {});
  // `w` is the workload shape ("lock-inc", "lock-hot": a lock-only
  // transaction on those keys); `topic` defaults to the workload's own topic.
  // extended: pgbench -M extended ("pgbench-extended").
  Cell RunLibrary(const std::string& w, int threads,
                  const std::string& topic = "",
                  LibraryForm form = LibraryForm::kDefault);
  Cell RunPgbench(const std::string& w, int threads, bool extended = false);
  Cell RunRejected(const std::string& w, const std::string& design,
                   int threads);
  void ThroughputSection();
  void SqlCheck();
  std::map<std::string, std::int64_t> StatementCalls();
  // The forms of LockCompactionHead side by side (issue 26): the former
  // loop, 0660's one-statement upsert, the lock_<id> function, the library.
  Cell RunLockForm(const std::string& w, const std::string& form, int threads);
  void LockFormsSection();

  // janitor and stats
  void InsertHeadless(const std::string& topic, long from, long n,
                      bool expired);
  void JanitorSection();
  void StatsSection();

  // log compaction (Janitor::CompactLog)
  void LogSection();
  void LogStorage();
  void LogThroughput();
  void LogDeleteRate();
  void LogIdlePass();
  std::int64_t RegisterLogTopic(Client& client, const std::string& name,
                                double retention_s);
  void ResetCleaner(const std::string& topic);
  void CheckHeads(const std::string& topic, const std::string& when);
  std::string CleanerStatements();

  // batches (Producer::ProduceBatch)
  void SetupBatch();
  Cell RunBatchLibrary(int threads, int batch);
  Cell RunBatchPgbench(int threads, int batch);
  void BatchSection();

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
  std::vector<std::string> lockforms_md_;
  double BackendCpu(const std::string& app);
  // During SqlCheck, RunLibrary records the calls its warm-up made.
  bool in_sqlcheck_ = false;
  std::map<std::string, std::int64_t> sqlcheck_baseline_;
  std::vector<std::string> janitor_md_, stats_md_, sqlcheck_md_, log_md_,
      errors_;
  std::vector<std::string> batch_md_;
  bool pgss_ = false;
  std::uint64_t cell_seq_ = 0;
  int postmaster_ = 0;
  std::atomic<std::int64_t> total_errors_{0};
};

void Bench::Setup() {
  o_.schema =
      o_.short_mode ? "bench_smoke_" + std::to_string(getpid()) : "bench";
  q_ = "\"" + o_.schema + "\"";
  mon_.Exec("DROP SCHEMA IF EXISTS " + q_ + " CASCADE");
  Client c = Client::Connect("", ClientOptions{o_.schema, 2, "bench-setup"});
  c.InstallSchema();
  for (const char* t : {"inc", "hot", "new", "read", "produce"}) {
    c.Topic<Counter>(t).Register();
  }
  postmaster_ = ParentOf(PQbackendPID(mon_.get()));
  pgss_ = mon_.Value(
              "SELECT count(*) FROM pg_settings WHERE name = "
              "'shared_preload_libraries' "
              "AND setting LIKE '%pg_stat_statements%'") == "1";
  if (pgss_) mon_.Exec("CREATE EXTENSION IF NOT EXISTS pg_stat_statements");
  Populate("inc", o_.keys);
  Populate("read", o_.keys);
  Populate("produce", o_.keys);
  Populate("hot", 1);
  // Headless rows under keys the workload never draws: with its head table
  // empty at the first cell's VACUUM, every connection's generic plan for
  // the lock would be a sequential scan (reltuples 0), kept while the cell
  // grows the table, and that cell ran at half speed whichever variant
  // came first (run H).
  mon_.Exec("INSERT INTO " + Head("new") +
            " (message_key, created_at, updated_at, idle_since) SELECT 'seed-' "
            "|| i, now(), now(), now() "
            "FROM generate_series(1, " +
            std::to_string(o_.keys) + ") i");
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
  const std::int64_t id =
      mon_.Int("SELECT id FROM " + q_ + ".topic WHERE name = $1", {name});
  topic_ids_[name] = id;
  return id;
}

void Bench::Populate(const std::string& topic, int nkeys) {
  mon_.Exec(
      "WITH m AS (INSERT INTO " + Msg(topic) +
      " (message_key, schema_version, compaction_rank, payload) "
      "SELECT i::text, 1, 0, '{\"value\": 0}' FROM generate_series(1, " +
      std::to_string(nkeys) + ") i RETURNING id, message_key) INSERT INTO " +
      Head(topic) +
      " (message_key, head_id, schema_version, compaction_rank, created_at, "
      "updated_at, idle_since) SELECT message_key, id, 1, 0, now(), now(), "
      "NULL FROM m");
}

void Bench::PrintSettings() {
  Res r = mon_.Exec(
      "SELECT name, setting, coalesce(unit, '') FROM pg_settings WHERE name IN "
      "('server_version', 'shared_buffers', 'fsync', 'synchronous_commit', "
      "'full_page_writes', 'wal_level', 'max_connections', 'work_mem', "
      "'autovacuum', "
      "'jit', 'max_wal_size', 'checkpoint_timeout', "
      "'shared_preload_libraries', "
      "'random_page_cost', 'effective_cache_size', 'huge_pages', "
      "'default_transaction_isolation', 'wal_buffers', 'max_worker_processes') "
      "ORDER BY name");
  for (int i = 0; i < PQntuples(r.get()); ++i) {
    settings_.push_back(std::string(PQgetvalue(r.get(), i, 0)) + " = " +
                        PQgetvalue(r.get(), i, 1) + " " +
                        PQgetvalue(r.get(), i, 2));
  }
}

TableStats Bench::Snapshot() {
  Res r = mon_.Exec(
      "SELECT coalesce(sum(n_dead_tup),0), coalesce(sum(n_tup_upd),0), "
      "coalesce(sum(n_tup_hot_upd),0), coalesce(sum(n_tup_ins),0), "
      "coalesce(sum(n_tup_del),0), pg_wal_lsn_diff(pg_current_wal_lsn(), "
      "'0/0')::bigint "
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

// CPU seconds spent so far by the live backends of `app` (utime + stime
// from /proc, what the postmaster adds to its cutime/cstime when it reaps
// them).
double Bench::BackendCpu(const std::string& app) {
  Res r = mon_.Exec(
      "SELECT pid FROM pg_stat_activity WHERE application_name = $1", {app});
  double total = 0;
  for (int i = 0; i < PQntuples(r.get()); ++i) {
    total +=
        ProcStatSeconds(PQgetvalue(r.get(), i, 0), 14, 15);  // utime, stime
  }
  return total;
}

// Backends flush their table statistics when they exit; waiting for them
// makes the n_dead_tup / n_tup_* deltas complete.
void Bench::WaitGone(const std::string& app) {
  for (int i = 0; i < 500; ++i) {
    if (mon_.Int(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1",
            {app}) == 0)
      return;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

Cell Bench::Measure(const std::string& workload, const std::string& variant,
                    int threads, const std::string& app,
                    const std::function<void(Cell&)>& body, bool vacuum,
                    const std::function<double()>& prepare) {
  Cell cell;
  cell.workload = workload;
  cell.variant = variant;
  cell.threads = threads;
  // What `prepare` ran is not the cell's, except the CPU of backends that
  // live on into it, which the postmaster counts only when they exit.
  double prepared_server_cpu = 0;
  bool prepared = true;
  try {
    if (prepare) prepared_server_cpu = prepare();
  } catch (const std::exception& e) {
    ++cell.errors;
    cell.note = e.what();
    prepared = false;
  }
  if (vacuum) mon_.Exec("VACUUM " + Head(workload));
  const TableStats before = Snapshot();
  const Cpu cpu0 = ReadCpu(postmaster_);
  try {
    if (prepared) body(cell);
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
  cell.server_cpu = cpu1.server - cpu0.server - prepared_server_cpu;
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
    errors_.push_back(workload + "/" + variant + "/" + std::to_string(threads) +
                      ": " + std::to_string(cell.errors) + " errors; " +
                      cell.note);
  }
  std::fprintf(stderr,
               "  %-8s %-10s %2d thr: %8.0f tx/s p50 %7.0f us p99 %7.0f us "
               "retries %lld%s\n",
               workload.c_str(), variant.c_str(), threads,
               cell.seconds > 0 ? cell.tx / cell.seconds : 0.0,
               Percentiles(cell.lat_us).p50, Percentiles(cell.lat_us).p99,
               (long long)cell.retries, cell.errors ? " ERRORS" : "");
  return cell;
}

template <class Init, class Step>
void Bench::Workers(Cell& cell, int threads, Init&& init, Step&& step) {
  std::vector<std::thread> pool;
  std::vector<std::vector<double>> lat(threads);
  std::vector<std::int64_t> retries(threads, 0), errors(threads, 0),
      warm(threads, 0);
  const std::uint64_t seed =
      0x5eed + 1000003ULL * ++cell_seq_ + (std::uint64_t)getpid() * 31;
  std::mutex gate_mutex;
  std::condition_variable gate;
  int ready = 0;  // under gate_mutex
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
      {
        // Blocks rather than spins: a spinning thread's CPU and context
        // switches were counted against the library's cell while the
        // others were still warming up (up to 2x at 16 threads on the hot
        // key, run H).
        std::unique_lock l(gate_mutex);
        ++ready;
        gate.notify_all();
        gate.wait(l, [&] { return go.load(); });
      }
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
        lat[t].push_back(
            std::chrono::duration<double, std::micro>(Clock::now() - t0)
                .count());
      }
    });
  }
  {
    std::unique_lock l(gate_mutex);
    gate.wait(l, [&] { return ready == threads; });
    go = true;
  }
  gate.notify_all();
  const auto t0 = Clock::now();
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
  if (w == "new")
    return std::to_string(std::uniform_int_distribution<std::int64_t>(
        1, 1000000000000000LL)(rng));
  return std::to_string(std::uniform_int_distribution<int>(1, keys)(rng));
}

// The library, used the way an application would.
Cell Bench::RunLibrary(const std::string& w, int threads,
                       const std::string& topic_name, LibraryForm form) {
  const std::string app = "bench-lib";
  // "lock-<shape>": a lock-only transaction on that workload's topic and
  // keys (section lockforms); "new" is lock-only already.
  const bool lock_only = w.rfind("lock-", 0) == 0;
  const std::string shape = lock_only ? w.substr(5) : w;
  const std::string tn = topic_name.empty() ? shape : topic_name;
  ClientOptions options{o_.schema, threads, app};
  options.prepared_statements = form != LibraryForm::kUnnamed;
  if (form == LibraryForm::kNoCommitCheck)
    options.commit_check_timeout = std::chrono::milliseconds(0);
  const int keys = o_.keys;
  std::optional<Client> connected;
  std::optional<compaction::TopicHandle<Counter>> handle;
  // A long-running service has locked its keys before, and locks a key it
  // saw with a head the seed's way (doc/architecture.md): each cell starts
  // from that steady state, not from a fresh client's empty hints, and the
  // warm-up is not part of the cell. Only on the workloads' own topics: the
  // janitor and log-cleaner sections run their cells beside a sweep (whose
  // batches the warm-up's locks would wait for) and compare them with each
  // other, all cold.
  auto warm = [&]() -> double {
    handle.emplace(connected->Topic<Counter>(tn));
    if (!topic_name.empty() || (shape != "inc" && shape != "hot")) return 0;
    const int n = shape == "hot" ? 1 : keys;
    for (int first = 1; first <= n; first += 500) {
      connected->InTransaction([&](Tx& tx) {
        for (int k = first; k < first + 500 && k <= n; ++k)
          handle->Key(std::to_string(k)).LockCompactionHead(tx);
      });
    }
    if (in_sqlcheck_) sqlcheck_baseline_ = StatementCalls();
    return BackendCpu(app);  // the pool's backends live on into the cell
  };
  auto connect_and_warm = [&]() -> double {
    connected.emplace(Client::Connect("", options));
    try {
      return warm();
    } catch (...) {
      // No cell follows: close the connections before Measure waits.
      handle.reset();
      connected.reset();
      throw;
    }
  };
  return Measure(
      tn, lock_only ? "library-lock" : LibraryVariant(form), threads, app,
      [&](Cell& cell) {
        // The client ends inside the cell, whatever happens in it, so that
        // its connections close before Measure waits for them to go (the
        // topic handle and the producer keep it alive too).
        struct CloseAtEnd {
          std::optional<Client>& client;
          std::optional<compaction::TopicHandle<Counter>>& topic;
          ~CloseAtEnd() {
            topic.reset();
            client.reset();
          }
        } close_at_end{connected, handle};
        Client& client = *connected;
        auto& topic = *handle;
        auto producer = topic.RegisterProducer();
        struct S {};
        Workers(
            cell, threads, [](int) { return std::make_unique<S>(); },
            [&](S&, std::mt19937_64& rng, std::int64_t& retries) {
              const std::string key = KeyFor(shape, rng, keys);
              if (lock_only || w == "new") {
                client.InTransaction(
                    [&](Tx& tx) { topic.Key(key).LockCompactionHead(tx); });
              } else if (w == "inc" || w == "hot") {
                for (;;) {
                  try {
                    client.InTransaction([&](Tx& tx) {
                      auto head = topic.Key(key).LockCompactionHead(tx);
                      Counter next{head ? head->message.value + 1 : 1};
                      producer.ProduceInTx(
                          tx, next, ProduceOptions{key, CompactionOptions{0}});
                    });
                    return;
                  } catch (const compaction::RetryableError&) {
                    ++retries;
                  }
                }
              } else if (w == "read") {
                if (!topic.Key(key).CompactionHead())
                  throw std::runtime_error("read: no head");
              } else if (w == "produce") {
                producer.Produce(Counter{1},
                                 ProduceOptions{key, CompactionOptions{0}});
              }
            });
      },
      topic_name.empty(), connect_and_warm);
}

std::string Slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string ReplaceAll(std::string s, const std::string& from,
                       const std::string& to) {
  for (size_t at = s.find(from); at != std::string::npos;
       at = s.find(from, at + to.size())) {
    s.replace(at, from.size(), to);
  }
  return s;
}

// The library's SQL for this workload, run by pgbench -M prepared.
Cell Bench::RunPgbench(const std::string& w, int threads, bool extended) {
  const std::string app = "bench-pgbench";
  const std::string script = (w == "inc" || w == "hot") ? "inc" : w;
  auto render = [&](const std::string& name) {
    std::string s = Slurp(fs::path(o_.scripts) / (name + ".sql"));
    s = ReplaceAll(s, "{schema}", q_);
    s = ReplaceAll(s, "{head}", Head(w));
    s = ReplaceAll(s, "{message}", Msg(w));
    s = ReplaceAll(s, "{pkey}", Pkey(w));
    s = ReplaceAll(s, "{produce}",
                   q_ + ".produce_" + std::to_string(TopicId(w)));
    s = ReplaceAll(s, "{lock}", q_ + ".lock_" + std::to_string(TopicId(w)));
    const fs::path out =
        fs::path(o_.out) / "pgbench" / (w + "_" + name + ".sql");
    fs::create_directories(out.parent_path());
    std::ofstream(out) << s;
    return out.string();
  };
  std::string files = "-f " + render(script);
  return Measure(
      w, extended ? "pgbench-extended" : "pgbench", threads, app,
      [&](Cell& cell) {
        const fs::path logdir = fs::path(o_.out) / "pgbench" / "log";
        fs::remove_all(logdir);
        fs::create_directories(logdir);
        const std::string cmd =
            "PGAPPNAME=" + app + " " + o_.pgbench + " -n -M " +
            (extended ? "extended" : "prepared") + " -c " +
            std::to_string(threads) + " -j " + std::to_string(threads) +
            " -T " +
            std::to_string(std::max(1, (int)std::lround(o_.duration))) +
            " -D topic=" + w +
            " -D sv=1 -D rank=0 -D 'payload={\"value\": 1}' -D nkeys=" +
            std::to_string(w == "hot" ? 1 : o_.keys) +
            " -l --log-prefix=" + (logdir / "tx").string() + " " + files +
            " 2>&1";
        FILE* p = popen(cmd.c_str(), "r");
        std::string out;
        char buf[4096];
        while (size_t n = fread(buf, 1, sizeof buf, p)) out.append(buf, n);
        const int rc = pclose(p);
        std::smatch m;
        double tps = 0;
        if (std::regex_search(
                out, m,
                std::regex(
                    R"(tps = ([0-9.]+) \(without initial connection time\))")))
          tps = std::stod(m[1]);
        if (std::regex_search(
                out, m,
                std::regex(
                    R"(number of transactions actually processed: ([0-9]+))")))
          cell.tx = std::stoll(m[1]);
        if (std::regex_search(
                out, m,
                std::regex(R"(number of failed transactions: ([0-9]+))")))
          cell.errors += std::stoll(m[1]);
        cell.seconds = tps > 0 ? cell.tx / tps : o_.duration;
        if (rc != 0 || tps == 0) {
          ++cell.errors;
          cell.note = "pgbench failed: " + out.substr(0, 600);
        }
        for (auto& f : fs::directory_iterator(logdir)) {
          std::ifstream in(f.path());
          long client, txno, script_no, epoch, us;
          double lat;
          while (in >> client >> txno >> lat >> script_no >> epoch >> us)
            cell.lat_us.push_back(lat);
        }
        fs::remove_all(logdir);  // per-transaction logs are large; the cell
                                 // keeps the latencies
      });
}

// The rejected designs, written here the way an application would.
Cell Bench::RunRejected(const std::string& w, const std::string& design,
                        int threads) {
  const std::string app = "bench-" + design;
  const std::string head = Head(w), msg = Msg(w), pkey = Pkey(w);
  const std::string cols =
      "m.id, m.message_key, m.schema_version, m.compaction_rank, "
      "(extract(epoch FROM m.created_at) * 1000000)::bigint, m.payload::text";
  const std::string resolve =
      "SELECT t.id, t.name, t.headless_ttl_ms, v.version FROM " + q_ +
      ".topic t LEFT JOIN " + q_ +
      ".schema_version v ON v.topic_id = t.id WHERE t.name = $1";
  const std::string read = "SELECT h.head_id, " + cols + " FROM " + head +
                           " h LEFT JOIN " + msg +
                           " m ON m.id = h.head_id WHERE h.message_key = $1";
  const std::string by_id =
      "SELECT " + cols + " FROM " + msg + " m WHERE m.id = $1";
  // The library's produce (produce_<id>, as ProduceInTx sends it), so
  // that only the coordination differs.
  const std::string tid = std::to_string(TopicId(w));
  const std::string produce =
      "SELECT p.message_id, p.advanced FROM " + q_ + ".produce_" + tid +
      "($1::text, $2::integer, $4::bigint, $3::jsonb) p";
  // Conditional write: the head moves only if it is still the version read.
  const std::string cond =
      "WITH m AS (INSERT INTO " + msg +
      " (message_key, schema_version, compaction_rank, payload) VALUES ($1, "
      "$2, $4, $3::jsonb) "
      "RETURNING id), h AS (UPDATE " +
      head +
      " h SET head_id = m.id, schema_version = $2, compaction_rank = $4, "
      "updated_at = statement_timestamp(), idle_since = NULL FROM m WHERE "
      "h.message_key = $1 "
      "AND h.head_id = $5 RETURNING h.head_id) SELECT m.id, EXISTS (SELECT 1 "
      "FROM h) FROM m";
  // Ensure-and-lock in one statement: ON CONFLICT DO UPDATE locks the row but
  // writes a new row version every time.
  const std::string upsert_lock =
      "WITH h AS (INSERT INTO " + head +
      " AS h (message_key, created_at, updated_at, idle_since) VALUES ($1, "
      "statement_timestamp(), statement_timestamp(), statement_timestamp()) ON "
      "CONFLICT ON "
      "CONSTRAINT " +
      pkey +
      " DO UPDATE SET updated_at = CASE WHEN h.head_id IS NULL THEN "
      "excluded.updated_at ELSE "
      "h.updated_at END, idle_since = CASE WHEN h.head_id IS NULL THEN "
      "excluded.idle_since "
      "ELSE NULL END RETURNING h.head_id) SELECT h.head_id, " +
      cols + " FROM h LEFT JOIN " + msg + " m ON m.id = h.head_id";
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
          // Topic ids start at the install's clock (past int4): their low
          // 31 bits make the first key of the lock.
          c->Prepare("adv",
                     "SELECT pg_advisory_xact_lock(($1::bigint % 2147483648)"
                     "::int, hashtext($2))");
          c->Prepare("begin", "BEGIN ISOLATION LEVEL READ COMMITTED");
          c->Prepare("begin_ser", "BEGIN ISOLATION LEVEL SERIALIZABLE");
          return c;
        },
        [&](Conn& c, std::mt19937_64& rng, std::int64_t& retries) {
          const std::string key = KeyFor(w, rng, keys);
          auto value_of = [&](PGresult* r, int col) -> std::int64_t {
            if (PQgetisnull(r, 0, col)) return 0;
            return nlohmann::json::parse(PQgetvalue(r, 0, col))
                .at("value")
                .get<std::int64_t>();
          };
          // Framed as the library frames its transaction: BEGIN, the
          // topic's resolution and the design's first statement(s) in one
          // pipeline (the topic id cached, as the library caches it), then
          // the produce and COMMIT, each a round trip.
          std::vector<Conn::Call> first = {
              {design == "serializable" ? "begin_ser" : "begin", {}},
              {"resolve", {w}}};
          if (design == "advisory") {
            // The read is its own statement: its snapshot comes after the
            // lock.
            first.push_back({"adv", {tid, key}});
            first.push_back({"read", {key}});
          } else if (design == "upsert-lock") {
            first.push_back({"upsert_lock", {key}});
          } else {
            first.push_back({"read", {key}});
          }
          for (;;) {
            try {
              std::vector<Res> firsts = c.Pipeline(first);
              const Res& h = firsts.back();
              std::int64_t value = 0;
              std::string expected;
              if (design == "advisory") {
                if (PQntuples(h.get())) value = value_of(h.get(), 6);
              } else if (design == "serializable" || design == "conditional") {
                if (PQntuples(h.get())) {
                  value = value_of(h.get(), 6);
                  expected = PQgetvalue(h.get(), 0, 0);
                }
              } else if (design == "upsert-lock") {
                if (!PQgetisnull(h.get(), 0, 0)) {
                  if (!PQgetisnull(h.get(), 0, 1) &&
                      std::string(PQgetvalue(h.get(), 0, 0)) ==
                          PQgetvalue(h.get(), 0, 1)) {
                    value = value_of(h.get(), 6);
                  } else {  // waited: the head moved after our snapshot
                    Res m = c.Run("by_id", {PQgetvalue(h.get(), 0, 0)});
                    value = value_of(m.get(), 5);
                  }
                }
              }
              const std::string payload =
                  nlohmann::json{{"value", value + 1}}.dump();
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
              if (PQtransactionStatus(c.get()) != PQTRANS_IDLE)
                Res(PQexec(c.get(), "ROLLBACK"));
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

std::string Fmt(double v, int prec);

// Lock-only transactions in three forms, each on raw libpq with prepared
// statements, so that only the form differs: "lock-loop" is the loop the
// library ran before lock_<id> (the lock and the head read, then the
// headless insert on a miss or the refresh of a headless row), "lock-upsert"
// decision 0660's one statement (ON CONFLICT DO UPDATE SET message_key =
// EXCLUDED.message_key: a row version per lock), "lock-fn" the library's
// lock_<id>. Every form is framed as the library frames a transaction whose
// first operation is the lock: one pipeline with one Sync of [BEGIN
// ISOLATION LEVEL READ COMMITTED; the topic resolution; the form's first
// statement(s)], then the round trips the form still needs (the loop's
// insert or refresh), then COMMIT. Workloads: "new" always-new keys, "inc"
// the 10,000 keys with heads (lock-only, so they keep them), "hot" one key.
// The resolution and the columns are the library's texts (topics.cpp,
// rows.hpp), so the forms and the library differ in nothing else.
Cell Bench::RunLockForm(const std::string& w, const std::string& form,
                        int threads) {
  const std::string app = "bench-" + form;
  const std::string head = Head(w), msg = Msg(w), pkey = Pkey(w);
  auto micros = [](const std::string& c) {
    return "(extract(epoch FROM CASE WHEN " + c +
           " IS NULL THEN NULL ELSE least(greatest(" + c +
           ", '1900-01-01 00:00+00'::timestamptz), "
           "'2200-01-01 00:00+00'::timestamptz) END) * 1e6)::bigint";
  };
  const std::string cols =
      "m.id, m.message_key, m.schema_version, m.compaction_rank, " +
      micros("m.created_at") + ", m.payload::text";
  const std::string resolve =
      "SELECT t.id, t.name, t.headless_ttl_ms, t.retention_ms, "
      "t.tombstone_retention_ms, t.partitions, t.consumer_inactive_after_ms, "
      "v.version, v.fingerprint, "
      "pg_catalog.current_setting('lock_timeout') FROM " +
      q_ + ".topic t LEFT JOIN " + q_ +
      ".schema_version v ON v.topic_id = t.id WHERE t.name = $1::text";
  const std::string lock = "SELECT h.head_id FROM " + head +
                           " h WHERE h.message_key = $1 FOR "
                           "UPDATE OF h";
  const std::string read = "SELECT " + cols + " FROM " + head + " h JOIN " +
                           msg +
                           " m ON m.id = h.head_id WHERE h.message_key = $1";
  const std::string insert = "INSERT INTO " + head +
                             " (message_key) VALUES ($1) ON CONFLICT ON "
                             "CONSTRAINT " +
                             pkey + " DO NOTHING RETURNING message_key";
  const std::string refresh =
      "UPDATE " + head +
      " SET updated_at = pg_catalog.statement_timestamp(), idle_since = "
      "pg_catalog.statement_timestamp() WHERE message_key = $1 AND head_id "
      "IS NULL";
  const std::string upsert =
      "WITH h AS (INSERT INTO " + head +
      " AS h (message_key) VALUES ($1) ON CONFLICT ON CONSTRAINT " + pkey +
      " DO UPDATE SET message_key = EXCLUDED.message_key RETURNING "
      "h.head_id) SELECT h.head_id, " +
      cols + " FROM h LEFT JOIN " + msg + " m ON m.id = h.head_id";
  const std::string fn = "SELECT m.status, " + cols + " FROM " + q_ + ".lock_" +
                         std::to_string(TopicId(w)) +
                         "($1::text, $2::boolean) m";
  // Insert or lock: ON CONFLICT DO UPDATE locks the conflicting row even
  // when its WHERE is false, so an existing head is locked without a row
  // version, a headless one refreshed, a new key inserted; the executor
  // retries a lost race itself. The head read follows as its own
  // statement (its snapshot must come after the lock).
  const std::string ioc =
      "INSERT INTO " + head +
      " AS h (message_key) VALUES ($1) ON CONFLICT "
      "ON CONSTRAINT " +
      pkey +
      " DO UPDATE SET updated_at = pg_catalog.statement_timestamp(), "
      "idle_since = pg_catalog.statement_timestamp() WHERE h.head_id IS NULL "
      "RETURNING h.head_id";
  const std::string fn2_name =
      q_ + ".bench_lock_ioc_" + std::to_string(TopicId(w));
  if (form == "lock-fn2") {
    Conn setup("bench-setup");
    setup.Exec(
        "CREATE OR REPLACE FUNCTION " + fn2_name +
        "(p_key text, p_guarded boolean, OUT status \"char\", OUT id bigint, "
        "OUT message_key text, OUT schema_version integer, OUT "
        "compaction_rank bigint, OUT created_at timestamptz, OUT payload "
        "jsonb) LANGUAGE plpgsql AS $f$\n#variable_conflict use_column\n"
        "BEGIN\n"
        "  IF NOT p_guarded AND pg_catalog.current_setting('lock_timeout') "
        "OPERATOR(pg_catalog.<>) '0' THEN status := 'g'; RETURN; END IF;\n"
        "  INSERT INTO " +
        head +
        " AS h (message_key) VALUES (p_key) ON "
        "CONFLICT ON CONSTRAINT " +
        pkey +
        " DO UPDATE SET updated_at = pg_catalog.statement_timestamp(), "
        "idle_since = pg_catalog.statement_timestamp() WHERE h.head_id IS "
        "NULL;\n"
        "  IF FOUND THEN status := 'e'; RETURN; END IF;\n"
        "  SELECT m.id, m.message_key, m.schema_version, m.compaction_rank, "
        "m.created_at, m.payload INTO id, message_key, schema_version, "
        "compaction_rank, created_at, payload FROM " +
        head + " h JOIN " + msg +
        " m ON m.id OPERATOR(pg_catalog.=) h.head_id WHERE "
        "h.message_key OPERATOR(pg_catalog.=) p_key;\n"
        "  status := 'h';\nEND\n$f$");
  }
  const std::string fn2 = "SELECT m.status, " + cols + " FROM " + fn2_name +
                          "($1::text, $2::boolean) m";
  return Measure(w, form, threads, app, [&](Cell& cell) {
    const int keys = o_.keys;
    Workers(
        cell, threads,
        [&](int) {
          auto c = std::make_unique<Conn>(app);
          for (auto& [name, sql] :
               std::vector<std::pair<std::string, std::string>>{
                   {"resolve", resolve},
                   {"lock", lock},
                   {"read", read},
                   {"insert", insert},
                   {"refresh", refresh},
                   {"upsert", upsert},
                   {"fn", fn},
                   {"ioc", ioc},
                   {"begin", "BEGIN ISOLATION LEVEL READ COMMITTED"},
                   {"commit", "COMMIT"}}) {
            c->Prepare(name, sql);
          }
          if (form == "lock-fn2") c->Prepare("fn2", fn2);
          return c;
        },
        [&](Conn& c, std::mt19937_64& rng, std::int64_t&) {
          const std::string key = KeyFor(w, rng, keys);
          std::vector<Conn::Call> first = {{"begin", {}}, {"resolve", {w}}};
          if (form == "lock-fn") {
            first.push_back({"fn", {key, "f"}});
            c.Pipeline(first);
          } else if (form == "lock-fn2") {
            first.push_back({"fn2", {key, "f"}});
            c.Pipeline(first);
          } else if (form == "lock-ioc") {
            first.push_back({"ioc", {key}});
            first.push_back({"read", {key}});
            c.Pipeline(first);
          } else if (form == "lock-upsert") {
            first.push_back({"upsert", {key}});
            c.Pipeline(first);
          } else {
            // The lock and the head read in one round trip; a miss inserts
            // the headless row and, when a concurrent insert won, locks again.
            first.push_back({"lock", {key}});
            first.push_back({"read", {key}});
            for (;;) {
              std::vector<Res> r = c.Pipeline(first);
              const Res& locked = r[r.size() - 2];
              if (PQntuples(locked.get()) == 1) {
                if (PQgetisnull(locked.get(), 0, 0)) c.Run("refresh", {key});
                break;
              }
              Res ins = c.Run("insert", {key});
              if (PQntuples(ins.get()) == 1) break;
              first = {{"lock", {key}}, {"read", {key}}};
            }
          }
          c.Run("commit", {});
        });
  });
}

// "a,b,,c" -> {a, b, c}.
std::vector<std::string> SplitList(const std::string& list) {
  std::vector<std::string> out;
  for (std::size_t at = 0; at <= list.size();) {
    const std::size_t comma = std::min(list.find(',', at), list.size());
    if (comma > at) out.push_back(list.substr(at, comma - at));
    at = comma + 1;
  }
  return out;
}

void Bench::LockFormsSection() {
  std::vector<std::string> forms = {"lock-loop", "lock-upsert", "lock-fn",
                                    "library"};
  // Candidate forms beside these (lock-ioc, lock-fn2): BENCH_LOCK_FORMS,
  // comma-separated, replaces the list (keep the four above in it for the
  // ratio table).
  if (const char* env = std::getenv("BENCH_LOCK_FORMS")) forms = SplitList(env);
  std::vector<std::string> workloads = {"new", "inc", "hot"};
  // BENCH_LOCK_KEYS (comma-separated) picks the workloads, e.g. "new".
  if (const char* env = std::getenv("BENCH_LOCK_KEYS"))
    workloads = SplitList(env);
  std::map<std::tuple<std::string, std::string, int>, std::vector<double>> tps,
      csw, cpu;
  for (const auto& w : workloads) {
    std::fprintf(stderr, "lock forms %s\n", w.c_str());
    for (int threads : o_.threads) {
      for (int round = 0; round < o_.rounds; ++round) {
        std::vector<std::string> order = forms;
        if (round % 2 == 1) std::reverse(order.begin(), order.end());
        for (const auto& f : order) {
          Cell c = f == "library" ? RunLibrary("lock-" + w, threads)
                                  : RunLockForm(w, f, threads);
          if (c.seconds > 0) tps[{w, f, threads}].push_back(c.tx / c.seconds);
          if (c.tx > 0) {
            csw[{w, f, threads}].push_back((double)c.client_csw /
                                           (c.tx + c.extra_tx));
            cpu[{w, f, threads}].push_back(1e6 * c.client_cpu /
                                           (c.tx + c.extra_tx));
          }
        }
      }
    }
  }
  auto median = [](std::vector<double> v) {
    if (v.empty()) return 0.0;
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  lockforms_md_.push_back(
      "Lock-only transactions, raw libpq, prepared, framed as the library "
      "frames them: one pipeline (one Sync) of [BEGIN ISOLATION LEVEL READ "
      "COMMITTED; topic resolution; the form's first statement(s): lock-loop "
      "lock + head read, lock-upsert the upsert, lock-fn lock_<id>], then "
      "the loop's insert on a miss or refresh of a headless row, each a "
      "round trip, then COMMIT. tx/s, median of " +
      std::to_string(o_.rounds) +
      " rounds in alternating order. Keys: new = always new, inc = the "
      "10,000 keys with heads, hot = one key with a head. library = "
      "LockCompactionHead alone in InTransaction, same topic and keys, "
      "topic registered before the cell.");
  lockforms_md_.push_back("");
  lockforms_md_.push_back(
      "| keys | threads | lock-loop | lock-upsert | lock-fn | library | "
      "library / loop | library / upsert | fn / loop | fn / upsert |");
  lockforms_md_.push_back("|---|---|---|---|---|---|---|---|---|---|");
  auto ratio = [](double a, double b) {
    return a > 0 && b > 0 ? Fmt(a / b, 2) : std::string("-");
  };
  for (const auto& w : workloads) {
    for (int threads : o_.threads) {
      const double loop = median(tps[{w, "lock-loop", threads}]);
      const double up = median(tps[{w, "lock-upsert", threads}]);
      const double fn = median(tps[{w, "lock-fn", threads}]);
      const double lib = median(tps[{w, "library", threads}]);
      lockforms_md_.push_back(
          "| " + w + " | " + std::to_string(threads) + " | " + Fmt(loop, 0) +
          " | " + Fmt(up, 0) + " | " + Fmt(fn, 0) + " | " + Fmt(lib, 0) +
          " | " + ratio(lib, loop) + " | " + ratio(lib, up) + " | " +
          ratio(fn, loop) + " | " + ratio(fn, up) + " |");
    }
  }
  // One column per form: `values`' median for each workload and threads.
  auto per_form = [&](const std::string& title, const auto& values, int prec) {
    lockforms_md_.push_back("");
    lockforms_md_.push_back(title);
    lockforms_md_.push_back("");
    std::string header = "| keys | threads |", rule = "|---|---|";
    for (const auto& f : forms) {
      header += " " + f + " |";
      rule += "---|";
    }
    lockforms_md_.push_back(header);
    lockforms_md_.push_back(rule);
    for (const auto& w : workloads) {
      for (int threads : o_.threads) {
        std::string row = "| " + w + " | " + std::to_string(threads) + " |";
        for (const auto& f : forms) {
          auto it = values.find({w, f, threads});
          row += " " +
                 Fmt(it == values.end() ? 0.0 : median(it->second), prec) +
                 " |";
        }
        lockforms_md_.push_back(row);
      }
    }
  };
  per_form("Every form, tx/s, median of rounds:", tps, 0);
  // The framing made visible: at 1 thread the client sleeps once per round
  // trip, so its context switches per transaction are about its round trips
  // (plus involuntary ones on a loaded machine).
  per_form(
      "Client context switches per transaction (about the round trips at 1 "
      "thread), median of rounds:",
      csw, 2);
  // What the client itself spends: the library's overhead over a raw form
  // with the same statements and round trips.
  per_form("Client CPU per transaction (us), median of rounds:", cpu, 1);
}

void Bench::ThroughputSection() {
  std::vector<std::string> workloads = {"inc", "hot", "new", "read", "produce"};
  const std::vector<std::string> rejected = {"advisory", "serializable",
                                             "conditional", "upsert-lock"};
  for (const auto& w : workloads) {
    if (!o_.only.empty() && !o_.only.count(w)) continue;
    std::fprintf(stderr, "workload %s\n", w.c_str());
    for (int threads : o_.threads) {
      for (int round = 0; round < o_.rounds; ++round) {
        std::vector<std::string> order = {"library", "pgbench"};
        // The unnamed-statement pair (issue 15, run P) and the library
        // without its commit check only when asked for.
        for (const char* v :
             {"library-unnamed", "pgbench-extended", "library-nocheck"}) {
          if (o_.variants.count(v)) order.push_back(v);
        }
        if (w == "inc" || w == "hot")
          order.insert(order.end(), rejected.begin(), rejected.end());
        // Alternate: the library runs first in even rounds, last in odd ones.
        if (round % 2 == 1) std::reverse(order.begin(), order.end());
        for (const auto& v : order) {
          if (!o_.variants.empty() && !o_.variants.count(v)) continue;
          Cell c;
          if (v == "library")
            c = RunLibrary(w, threads);
          else if (v == "library-unnamed")
            c = RunLibrary(w, threads, "", LibraryForm::kUnnamed);
          else if (v == "library-nocheck")
            c = RunLibrary(w, threads, "", LibraryForm::kNoCommitCheck);
          else if (v == "pgbench")
            c = RunPgbench(w, threads);
          else if (v == "pgbench-extended")
            c = RunPgbench(w, threads, true);
          else
            c = RunRejected(w, v, threads);
          c.round = round;
          cells_.push_back(std::move(c));
        }
      }
    }
  }
}

// pg_stat_statements' calls per statement of the bench's schema, the
// texts normalized (parameters as $?, no marker comments or extra blanks).
std::map<std::string, std::int64_t> Bench::StatementCalls() {
  std::map<std::string, std::int64_t> out;
  Res r = mon_.Exec(
      "SELECT query, calls FROM pg_stat_statements WHERE query LIKE '%' || "
      "$1 || '%' "
      "AND query NOT LIKE '%pg_stat_%' AND query NOT LIKE 'VACUUM%'",
      {q_});
  for (int i = 0; i < PQntuples(r.get()); ++i) {
    std::string s = std::regex_replace(std::string(PQgetvalue(r.get(), i, 0)),
                                       std::regex(R"(\$[0-9]+)"), "$?");
    s = std::regex_replace(s, std::regex(R"(/\*[^*]*\*/)"),
                           "");  // marker comments
    s = std::regex_replace(s, std::regex(R"(\s+)"), " ");
    s = std::regex_replace(s, std::regex(R"(^ | $)"), "");
    out[s] += std::stoll(PQgetvalue(r.get(), i, 1));
  }
  return out;
}

// Runs each workload briefly through the library and through pgbench with
// pg_stat_statements reset in between, and compares the statement texts
// (parameter numbers and transaction control aside).
void Bench::SqlCheck() {
  if (!pgss_) {
    sqlcheck_md_.push_back(
        "pg_stat_statements is not preloaded on this server: SQL identity "
        "check skipped.");
    return;
  }
  const double saved = o_.duration;
  o_.duration = 0.5;
  in_sqlcheck_ = true;
  sqlcheck_md_.push_back(
      "| workload | statements per tx (library) | statements per tx (pgbench) "
      "| identical | library calls of its most frequent statement | library "
      "statements run once per client/connection only |");
  sqlcheck_md_.push_back("|---|---|---|---|---|---|");
  for (const std::string w : {"inc", "new", "read", "produce"}) {
    mon_.Exec("SELECT pg_stat_statements_reset()");
    sqlcheck_baseline_.clear();
    RunLibrary(w, 1);
    auto lib = StatementCalls();
    // Less what RunLibrary's warm-up ran before the measured cell.
    for (auto& [text, calls] : sqlcheck_baseline_) lib[text] -= calls;
    std::erase_if(lib, [](const auto& e) { return e.second <= 0; });
    mon_.Exec("SELECT pg_stat_statements_reset()");
    RunPgbench(w, 1);
    auto pgb = StatementCalls();
    // Statements run once per client or connection (the schema version
    // check of Client::Connect, the first topic resolution that fills the
    // cache) are not part of the transaction shape: compare the statements
    // that run at least once per 20 transactions.
    auto per_tx = [](const std::map<std::string, std::int64_t>& m,
                     std::set<std::string>& out,
                     std::vector<std::string>& setup) {
      std::int64_t top = 0;
      for (auto& [k, v] : m) top = std::max(top, v);
      for (auto& [k, v] : m) {
        if (v * 20 >= top)
          out.insert(k);
        else
          setup.push_back(k.substr(0, 90) + " (" + std::to_string(v) +
                          " calls)");
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
    sqlcheck_md_.push_back("| " + w + " | " + std::to_string(a.size()) + " | " +
                           std::to_string(b.size()) + " | " +
                           (same ? "yes" : "**NO**") + " | " +
                           std::to_string(top_a) + " | " +
                           (setup.empty() ? "-" : "`" + setup + "`") + " |");
    if (!same) {
      errors_.push_back(
          "SQL check " + w +
          ": the pgbench script no longer matches the library's SQL");
      for (auto& s : a)
        if (!b.count(s))
          sqlcheck_md_.push_back("|  | only library: `" + s.substr(0, 200) +
                                 "` | | | | |");
      for (auto& s : b)
        if (!a.count(s))
          sqlcheck_md_.push_back("|  | | only pgbench: `" + s.substr(0, 200) +
                                 "` | | | |");
    }
  }
  o_.duration = saved;
  in_sqlcheck_ = false;
  cells_.clear();  // the check cells are not results
}

// ---------------------------------------------------------------- janitor
void Bench::InsertHeadless(const std::string& topic, long from, long n,
                           bool expired) {
  // Spread idle_since over ten minutes in random order, as keys locked at
  // different times would be.
  mon_.Exec("SELECT setseed(0.5)");
  mon_.Exec("INSERT INTO " + Head(topic) +
            " (message_key, created_at, updated_at, idle_since) SELECT 'h' || "
            "i, t, t, t FROM "
            "generate_series(" +
            std::to_string(from) + ", " + std::to_string(from + n - 1) +
            ") i, LATERAL (SELECT now() - interval '" +
            (expired ? "1 hour" : "0 s") +
            "' - random() * interval '10 minutes' + (i * 0) * interval '1 s' "
            "AS t) x");
}

std::string Fmt(double v, int prec = 0) {
  char b[64];
  std::snprintf(b, sizeof b, "%.*f", prec, v);
  return b;
}

void Bench::JanitorSection() {
  const std::string topic = "jan";
  Client client =
      Client::Connect("", ClientOptions{o_.schema, 2, "bench-janitor"});
  compaction::TopicConfig config;
  config.headless_ttl = std::chrono::minutes(1);
  client.Topic<Counter>(topic).Register(config);
  const long n = o_.janitor_rows;
  janitor_md_.push_back(
      "Sweep of " + std::to_string(n) +
      " expired headless rows (idle_since spread over 10 minutes, random heap "
      "order, "
      "table VACUUM ANALYZEd after loading, as autovacuum would):");
  janitor_md_.push_back("");
  janitor_md_.push_back(
      "| method | rows | seconds | rows/s | ratio to unbounded DELETE | "
      "batches | WAL bytes/row |");
  janitor_md_.push_back("|---|---|---|---|---|---|---|");
  double unbounded_rate = 0;
  std::vector<int> batches = {0, 10000, 1000, 100};  // 0 = one unbounded DELETE
  for (int b : batches) {
    mon_.Exec("TRUNCATE " + Head(topic));
    const auto l0 = Clock::now();
    InsertHeadless(topic, 1, n, true);
    mon_.Exec("VACUUM ANALYZE " + Head(topic));
    const double load_s =
        std::chrono::duration<double>(Clock::now() - l0).count();
    const std::int64_t wal0 = Snapshot().wal;
    const auto t0 = Clock::now();
    std::int64_t deleted = 0;
    int nb = 0;
    bool capped = false;
    if (b == 0) {
      Res r = mon_.Exec(
          "DELETE FROM " + Head(topic) +
              " WHERE head_id IS NULL AND updated_at < now() - (SELECT "
              "headless_ttl_ms FROM " +
              q_ + ".topic WHERE name = $1) * interval '1 millisecond'",
          {topic});
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
        if (deleted < n &&
            std::chrono::duration<double>(Clock::now() - t0).count() >
                o_.janitor_cap) {
          capped = true;
          break;
        }
      }
    }
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    const std::int64_t wal = Snapshot().wal - wal0;
    const double rate = deleted / s;
    if (b == 0) unbounded_rate = rate;
    if (deleted != n && !capped)
      errors_.push_back("janitor batch " + std::to_string(b) + " deleted " +
                        std::to_string(deleted) + " of " + std::to_string(n));
    janitor_md_.push_back(
        "| " +
        (b == 0 ? std::string("one unbounded DELETE")
                : "SweepHeadless batch " + std::to_string(b)) +
        " | " + std::to_string(deleted) +
        (capped ? " (time cap: stopped)" : "") + " | " + Fmt(s, 2) + " | " +
        Fmt(rate) + " | " +
        Fmt(unbounded_rate > 0 ? rate / unbounded_rate : 0, 2) + " | " +
        std::to_string(nb) + " | " +
        Fmt((double)wal / std::max<std::int64_t>(deleted, 1), 1) + " |");
    std::fprintf(
        stderr,
        "  janitor batch %d: %lld rows in %.2f s (%.0f rows/s; load %.1f s)\n",
        b, (long long)deleted, s, rate, load_s);
  }

  // Lockers on live keys with and without a concurrent sweep.
  mon_.Exec("TRUNCATE " + Head(topic) + ", " + Msg(topic));
  Populate(topic, o_.keys);
  InsertHeadless(topic, 1, n, true);
  mon_.Exec("VACUUM ANALYZE " + Head(topic));
  const int threads = o_.short_mode ? 4 : 16;
  janitor_md_.push_back("");
  janitor_md_.push_back(
      "Lockers: " + std::to_string(threads) +
      " threads, LockCompactionHead + ProduceInTx + commit on " +
      std::to_string(o_.keys) +
      " live (materialized) keys of the same topic, " + Fmt(o_.duration, 1) +
      " s per phase, phases alternating; during a sweep phase "
      "SweepHeadless(batch 1000) runs "
      "in a loop on the same table, unpaced (batch_pause 0, the library "
      "default), paced by a "
      "fixed batch_pause of 10 ms, or by a duty_cycle on top of it (the pause "
      "after each batch at "
      "least its duration x (1 - duty_cycle) / duty_cycle). Before every phase "
      "the table is topped "
      "up to " +
      std::to_string(n) + " expired headless rows and vacuumed:");
  janitor_md_.push_back("");
  janitor_md_.push_back(
      "| phase | tx/s | p50 us | p99 us | p99 vs the no-sweep phase before | "
      "rows swept during phase |");
  janitor_md_.push_back("|---|---|---|---|---|---|");
  // Each sweep phase follows a no-sweep phase, its baseline; the cycle runs
  // twice, since p99 moves between phases on a shared machine.
  struct Phase {
    bool sweep;
    std::chrono::milliseconds pause;
    double duty_cycle;
  };
  const Phase kNone{false, {}, 1.0};
  const std::vector<Phase> kCycle = {
      {true, std::chrono::milliseconds(0), 1.0},
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
  std::map<std::string, std::pair<std::vector<std::string>, double>>
      ratios_by_kind;
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
      name = phase.pause.count() == 0
                 ? "sweep, unpaced"
                 : "sweep, batch_pause " + std::to_string(phase.pause.count()) +
                       " ms";
      if (phase.duty_cycle < 1.0)
        name += ", duty_cycle " + Fmt(phase.duty_cycle, 1);
    }
    janitor_md_.push_back(
        "| " + name + " | " + Fmt(cell.tx / cell.seconds) + " | " + Fmt(d.p50) +
        " | " + Fmt(d.p99) + " | " +
        (phase.sweep && base_p99 > 0 ? Fmt(d.p99 / base_p99, 2) : "-") + " | " +
        std::to_string(swept.load()) + " |");
    if (!phase.sweep)
      base_p99 = d.p99;  // each sweep phase is compared to the phase before it
    if (phase.sweep && base_p99 > 0) {
      auto& r = ratios_by_kind[name];
      r.first.push_back(Fmt(d.p99 / base_p99, 2));
      r.second += swept.load();
    }
  }
  janitor_md_.push_back("");
  janitor_md_.push_back(
      "| sweep phase | p99 vs the no-sweep phase before, each cycle | rows "
      "swept per second |");
  janitor_md_.push_back("|---|---|---|");
  for (const auto& [name, r] : ratios_by_kind) {
    std::string joined;
    for (const auto& x : r.first) joined += (joined.empty() ? "" : " / ") + x;
    janitor_md_.push_back("| " + name + " | " + joined + " | " +
                          Fmt(r.second / (o_.duration * r.first.size())) +
                          " |");
  }
}

void Bench::StatsSection() {
  const std::string topic = "stats";
  Client client =
      Client::Connect("", ClientOptions{o_.schema, 2, "bench-stats"});
  client.Topic<Counter>(topic).Register();
  auto handle = client.Topic<Counter>(topic);
  std::vector<long> sizes = o_.short_mode
                                ? std::vector<long>{1000, 10000}
                                : std::vector<long>{10000, 100000, 1000000};
  compaction::StatsOptions
      capped;  // compactiond's stats-exact-count-limit default
  capped.exact_count_limit = 10000;
  const compaction::StatsOptions exact;  // the library default: count every row
  stats_md_.push_back(
      "TopicHandle::Stats() (one round trip over the idle_since partial index "
      "plus the "
      "janitor_state row), " +
      std::string(o_.short_mode ? "5" : "20") +
      " calls per cell; `limit` counts exactly up to exact_count_limit = " +
      std::to_string(capped.exact_count_limit) +
      " (compactiond's default) and estimates above it "
      "(headless_rows_estimated), "
      "`exact` is the library default (StatsOptions::kCountAll, every headless "
      "row):");
  stats_md_.push_back("");
  stats_md_.push_back(
      "| headless rows | state | options | reported | first call ms | p50 ms | "
      "max ms | goal <= 50 ms |");
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
      const double v =
          std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
      const bool over = size > so.exact_count_limit;
      const bool ok =
          over ? st.headless_rows_estimated &&
                     st.headless_rows > so.exact_count_limit
               : !st.headless_rows_estimated && st.headless_rows == size;
      if (!ok)
        errors_.push_back("stats: reported " +
                          std::to_string(st.headless_rows) +
                          (st.headless_rows_estimated ? " (estimated)" : "") +
                          " for " + std::to_string(size));
      if (i == 0)
        first = v;
      else
        ms.push_back(v);
    }
    const Dist d = Percentiles(ms);
    const double mx = *std::max_element(ms.begin(), ms.end());
    stats_md_.push_back("| " + std::to_string(size) + " | " +
                        (vacuumed ? "after VACUUM (visibility map set)"
                                  : "just loaded, not vacuumed") +
                        " | " + (use_exact ? "exact" : "limit") + " | " +
                        std::to_string(st.headless_rows) +
                        (st.headless_rows_estimated ? " (estimated)" : "") +
                        " | " + Fmt(first, 1) + " | " + Fmt(d.p50, 1) + " | " +
                        Fmt(mx, 1) + " | " +
                        (d.p50 <= 50 ? "met" : "**missed**") + " |");
    std::fprintf(stderr, "  stats %ld rows %s %s: p50 %.1f ms\n", size,
                 vacuumed ? "vacuumed" : "fresh", use_exact ? "exact" : "limit",
                 d.p50);
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
  Res ex = mon_.Exec(
      "EXPLAIN (ANALYZE, BUFFERS, TIMING OFF) SELECT (SELECT count(*) FROM "
      "(SELECT 1 FROM " +
      Head(topic) + " h WHERE h.idle_since IS NOT NULL LIMIT " +
      std::to_string(capped.exact_count_limit + 1) +
      ") c), (SELECT h.idle_since FROM " + Head(topic) +
      " h WHERE h.idle_since IS NOT NULL ORDER BY h.idle_since LIMIT 1)");
  mon_.Exec("RESET enable_seqscan");
  for (int i = 0; i < PQntuples(ex.get()); ++i)
    explain += std::string(PQgetvalue(ex.get(), i, 0)) + "\n";
  stats_md_.push_back("");
  stats_md_.push_back(
      "Plan of the capped count and the oldest row, the shape of the library's "
      "statement, at " +
      std::to_string(have) +
      " rows (vacuumed, enable_seqscan off as in the library):");
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
    mon_.Exec("INSERT INTO " + q_ + ".compaction_head_" +
              std::to_string(info.id) +
              " (message_key, created_at, updated_at, idle_since) SELECT 'h' "
              "|| i, now(), now(), now() "
              "FROM generate_series(1, 10) i");
  }
  const double reg_s = std::chrono::duration<double>(Clock::now() - r0).count();
  mon_.Exec("ANALYZE");
  const int total_topics =
      (int)mon_.Int("SELECT count(*) FROM " + q_ + ".topic");
  std::vector<double> ms;
  for (int i = 0; i < (o_.short_mode ? 2 : 6); ++i) {
    const auto t0 = Clock::now();
    auto all = client.ListTopicStats();
    ms.push_back(
        std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    if ((int)all.size() != total_topics)
      errors_.push_back("ListTopicStats returned " +
                        std::to_string(all.size()));
  }
  const double first = ms.front();
  ms.erase(ms.begin());
  const Dist d = Percentiles(ms);
  stats_md_.push_back("");
  stats_md_.push_back(
      "Daemon-side refresh, Client::ListTopicStats() over " +
      std::to_string(total_topics) + " topics (" + std::to_string(topics) +
      " with 10 headless rows each; registering them took " + Fmt(reg_s, 1) +
      " s): first call " + Fmt(first, 1) +
      " ms (resolves and caches every topic), then p50 " + Fmt(d.p50, 1) +
      " ms, max " + Fmt(*std::max_element(ms.begin(), ms.end()), 1) +
      " ms, i.e. " + Fmt(d.p50 * 1000 / total_topics, 0) + " us per topic.");
  std::fprintf(stderr, "  ListTopicStats over %d topics: p50 %.1f ms\n",
               total_topics, d.p50);
}

// ---------------------------------------------------------- log compaction
// Janitor::CompactLog (issue 14): storage bound, cost to the writers, delete
// rate, and the cost of a pass with nothing to do. RESULTS.md, run H-log.

// compactiond's cleaner settings (daemon/config.hpp defaults).
compaction::SweepOptions DaemonSweepOptions() {
  compaction::SweepOptions so;
  so.batch_size = 1000;
  so.max_batches = 100;
  so.batch_pause = std::chrono::milliseconds(10);
  so.duty_cycle = 0.5;
  return so;
}

// compactiond's cleaner interval: clamp(retention / 2, 1 s, 5 min).
std::chrono::milliseconds CleanerInterval(double retention_s) {
  const double s = std::clamp(retention_s / 2, 1.0, 300.0);
  return std::chrono::milliseconds((long)std::lround(s * 1000));
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2]
                      : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

std::string Join(const std::vector<double>& v, int prec) {
  std::string out;
  for (double x : v) out += (out.empty() ? "" : " / ") + Fmt(x, prec);
  return out;
}

// Runs CompactLog passes on `topic` every `interval` (measured from each
// pass's start, as compactiond's timer does) until `stop`.
class CleanerLoop {
 public:
  CleanerLoop(Client& client, std::string topic,
              std::chrono::milliseconds interval, compaction::SweepOptions so)
      : janitor_(client),
        thread_([this, topic, interval, so] { Loop(topic, interval, so); }) {}
  ~CleanerLoop() { Stop(); }
  void Stop() {
    {
      std::lock_guard l(m_);
      stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }
  std::int64_t deleted() const { return deleted_; }
  int passes() const { return passes_; }
  const std::vector<double>& pass_ms() const { return pass_ms_; }
  const std::string& error() const { return error_; }

 private:
  void Loop(const std::string& topic, std::chrono::milliseconds interval,
            const compaction::SweepOptions& so) {
    for (;;) {
      const auto t0 = Clock::now();
      try {
        auto r = janitor_.CompactLog(topic, so);
        deleted_ += r.deleted;
        ++passes_;
        pass_ms_.push_back(
            std::chrono::duration<double, std::milli>(Clock::now() - t0)
                .count());
      } catch (const std::exception& e) {
        error_ = e.what();
        return;
      }
      std::unique_lock l(m_);
      if (cv_.wait_until(l, t0 + interval, [&] { return stop_; })) return;
    }
  }
  compaction::Janitor janitor_;
  std::mutex m_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::atomic<std::int64_t> deleted_{0};
  std::atomic<int> passes_{0};
  std::vector<double> pass_ms_;
  std::string error_;
  std::thread thread_;
};

// One SVG with a panel per series group: x = seconds, lines per series.
struct Series {
  std::string name, color;
  std::vector<std::pair<double, double>> points;
};
void WriteSvg(
    const fs::path& path, const std::string& title,
    const std::vector<std::pair<std::string, std::vector<Series>>>& panels) {
  const int pw = 560, ph = 360, ml = 80, mr = 20, mt = 50, mb = 50;
  const int width = (int)panels.size() * pw;
  std::ofstream out(path);
  out << "<svg xmlns='http://www.w3.org/2000/svg' width='" << width
      << "' height='" << ph + 30
      << "' font-family='sans-serif' font-size='12'>\n<rect width='100%' "
         "height='100%' fill='white'/>\n"
      << "<text x='" << width / 2
      << "' y='20' text-anchor='middle' font-size='14'>" << title
      << "</text>\n";
  for (size_t p = 0; p < panels.size(); ++p) {
    const int x0 = (int)p * pw + ml, y0 = mt, w = pw - ml - mr,
              h = ph - mt - mb + 30;
    double xmax = 1, ymax = 1;
    for (auto& s : panels[p].second)
      for (auto& [x, y] : s.points)
        xmax = std::max(xmax, x), ymax = std::max(ymax, y);
    // A round upper bound: 1, 2 or 5 times a power of ten.
    auto nice = [](double v) {
      const double e = std::pow(10, std::floor(std::log10(v)));
      for (double m : {1.0, 2.0, 5.0, 10.0})
        if (m * e >= v) return m * e;
      return 10 * e;
    };
    ymax = nice(ymax * 1.05);
    xmax = std::ceil(xmax / 10) * 10;
    auto X = [&](double x) { return x0 + w * x / xmax; };
    auto Y = [&](double y) { return y0 + h - h * y / ymax; };
    out << "<text x='" << x0 + w / 2 << "' y='" << y0 - 12
        << "' text-anchor='middle'>" << panels[p].first << "</text>\n";
    for (int i = 0; i <= 5; ++i) {
      const double yv = ymax * i / 5, xv = xmax * i / 5;
      out << "<line x1='" << x0 << "' x2='" << x0 + w << "' y1='" << Y(yv)
          << "' y2='" << Y(yv) << "' stroke='#ddd'/>\n<text x='" << x0 - 6
          << "' y='" << Y(yv) + 4 << "' text-anchor='end'>"
          << Fmt(yv, ymax < 10 ? 1 : 0) << "</text>\n<text x='" << X(xv)
          << "' y='" << y0 + h + 16 << "' text-anchor='middle'>" << Fmt(xv)
          << "</text>\n";
    }
    out << "<rect x='" << x0 << "' y='" << y0 << "' width='" << w
        << "' height='" << h << "' fill='none' stroke='black'/>\n<text x='"
        << x0 + w / 2 << "' y='" << y0 + h + 34
        << "' text-anchor='middle'>seconds</text>\n";
    int row = 0;
    for (auto& s : panels[p].second) {
      out << "<polyline fill='none' stroke-width='2' stroke='" << s.color
          << "' points='";
      for (auto& [x, y] : s.points)
        out << Fmt(X(x), 1) << "," << Fmt(Y(y), 1) << " ";
      out << "'/>\n<text x='" << x0 + 10 << "' y='" << y0 + 16 + 16 * row++
          << "' fill='" << s.color << "'>" << s.name << "</text>\n";
    }
  }
  out << "</svg>\n";
}

std::int64_t Bench::RegisterLogTopic(Client& client, const std::string& name,
                                     double retention_s) {
  compaction::TopicConfig config;
  config.retention =
      std::chrono::milliseconds((long)std::lround(retention_s * 1000));
  const std::int64_t id = client.Topic<Counter>(name).Register(config).id;
  // Every measurement vacuums these tables itself, at known moments.
  for (auto& tab : {Head(name), Msg(name)}) {
    mon_.Exec("ALTER TABLE " + tab + " SET (autovacuum_enabled = false)");
  }
  return id;
}

// Back to an empty log: truncated tables, the cleaner's position at 0.
void Bench::ResetCleaner(const std::string& topic) {
  mon_.Exec("TRUNCATE " + Head(topic) + ", " + Msg(topic) +
            " RESTART IDENTITY");
  mon_.Exec("UPDATE " + q_ +
                ".log_cleaner_state SET position = 0, pending_position = NULL, "
                "pending_xmax = NULL, tombstone_position = 0, "
                "tombstone_pending_position = NULL, "
                "tombstone_pending_xmax = NULL, next_created_at = NULL WHERE "
                "topic_id = $1",
            {std::to_string(TopicId(topic))});
}

// The log cleaner's invariant: every head names an existing message.
void Bench::CheckHeads(const std::string& topic, const std::string& when) {
  const std::int64_t lost = mon_.Int("SELECT count(*) FROM " + Head(topic) +
                                     " h WHERE h.head_id IS NOT NULL AND "
                                     "NOT EXISTS (SELECT 1 FROM " +
                                     Msg(topic) + " m WHERE m.id = h.head_id)");
  if (lost)
    errors_.push_back("log " + topic + " " + when + ": " +
                      std::to_string(lost) + " heads name a missing message");
}

// Server-side cost of the cleaner's statements since the last
// pg_stat_statements_reset(): calls, mean ms, buffers per call.
std::string Bench::CleanerStatements() {
  if (!pgss_) return "(pg_stat_statements not preloaded)";
  Res r = mon_.Exec(
      "SELECT coalesce(substring(query from '/\\* (compaction:[A-Za-z:]+) "
      "\\*/'), left(regexp_replace(query, '\\s+', ' ', 'g'), 60)), "
      "calls, round(mean_exec_time::numeric, 3), round((shared_blks_hit + "
      "shared_blks_read)::numeric / calls, 1) "
      "FROM pg_stat_statements WHERE query NOT LIKE '%pg_stat_statements%' AND "
      "query NOT LIKE 'VACUUM%' "
      "AND query NOT LIKE '%log_cleaner_state SET position = 0%' AND calls > 0 "
      "ORDER BY total_exec_time DESC LIMIT 12");
  std::string out =
      "| statement | calls | mean ms | buffers/call |\n|---|---|---|---|\n";
  for (int i = 0; i < PQntuples(r.get()); ++i) {
    std::string q = PQgetvalue(r.get(), i, 0);
    for (char& c : q)
      if (c == '|') c = '/';
    out += "| `" + q + "` | " + PQgetvalue(r.get(), i, 1) + " | " +
           PQgetvalue(r.get(), i, 2) + " | " + PQgetvalue(r.get(), i, 3) +
           " |\n";
  }
  return out;
}

void Bench::LogSection() {
  auto part = [&](const char* name, void (Bench::*fn)()) {
    if (!o_.only.empty() && !o_.only.count("log") && !o_.only.count(name))
      return;
    try {
      (this->*fn)();
    } catch (const std::exception& e) {
      errors_.push_back(std::string(name) + " failed: " + e.what());
      std::fprintf(stderr, "%s failed: %s\n", name, e.what());
    }
    Report();
  };
  part("log-storage", &Bench::LogStorage);
  part("log-tput", &Bench::LogThroughput);
  part("log-delete", &Bench::LogDeleteRate);
  part("log-idle", &Bench::LogIdlePass);
}

// (1) Storage bound: the same keys and steady rate into two topics at once,
// the cleaner on one of them; every second VACUUM each log and sample its
// live rows and size.
void Bench::LogStorage() {
  const double ret = o_.log_retention_s;
  const auto interval = CleanerInterval(ret);
  const int keys = o_.log_keys, rate = o_.log_rate, per_topic_threads = 2;
  Client client = Client::Connect(
      "",
      ClientOptions{o_.schema, 2 * per_topic_threads + 1, "bench-log-store"});
  Client cleaner_client =
      Client::Connect("", ClientOptions{o_.schema, 2, "bench-log-cleaner"});
  const std::vector<std::string> topics = {"log-clean", "log-keep"};
  for (auto& t : topics) {
    RegisterLogTopic(client, t, ret);
    ResetCleaner(t);
    Populate(t, keys);
    mon_.Exec("VACUUM ANALYZE " + Msg(t));
  }
  std::fprintf(stderr,
               "log storage: %d keys, %d msg/s per topic, retention %.0f s, "
               "cleaner every %lld ms, %.0f s\n",
               keys, rate, ret, (long long)interval.count(), o_.log_seconds);
  std::atomic<bool> stop{false};
  std::atomic<std::int64_t> produced[2] = {0, 0};
  std::vector<std::thread> producers;
  const auto start = Clock::now();
  for (int ti = 0; ti < 2; ++ti) {
    for (int k = 0; k < per_topic_threads; ++k) {
      producers.emplace_back([&, ti, k] {
        auto producer = client.Topic<Counter>(topics[ti]).RegisterProducer();
        std::mt19937_64 rng(77 + ti * 13 + k);
        // A fixed schedule, so both topics see the same steady rate.
        const auto step =
            std::chrono::duration<double>((double)per_topic_threads / rate);
        auto next = start;
        for (std::int64_t n = 1; !stop; ++n) {
          const std::string key =
              std::to_string(std::uniform_int_distribution<int>(1, keys)(rng));
          try {
            producer.Produce(Counter{n},
                             ProduceOptions{key, CompactionOptions{0}});
            ++produced[ti];
          } catch (const std::exception& e) {
            ++total_errors_;
            std::fprintf(stderr, "log producer: %s\n", e.what());
          }
          next += std::chrono::duration_cast<Clock::duration>(step);
          std::this_thread::sleep_until(next);
        }
      });
    }
  }
  CleanerLoop cleaner(cleaner_client, topics[0], interval,
                      DaemonSweepOptions());
  struct Sample {
    double t;
    std::int64_t rows[2], heap[2], total[2], produced[2];
  };
  std::vector<Sample> samples;
  for (int i = 1; i <= (int)std::lround(o_.log_seconds); ++i) {
    std::this_thread::sleep_until(start + std::chrono::seconds(i));
    Sample s{};
    s.t = std::chrono::duration<double>(Clock::now() - start).count();
    for (int ti = 0; ti < 2; ++ti) {
      mon_.Exec("VACUUM " + Msg(topics[ti]));
      Res r =
          mon_.Exec("SELECT (SELECT count(*) FROM " + Msg(topics[ti]) +
                    "), pg_relation_size('" + Msg(topics[ti]) +
                    "'), pg_total_relation_size('" + Msg(topics[ti]) + "')");
      s.rows[ti] = std::stoll(PQgetvalue(r.get(), 0, 0));
      s.heap[ti] = std::stoll(PQgetvalue(r.get(), 0, 1));
      s.total[ti] = std::stoll(PQgetvalue(r.get(), 0, 2));
      s.produced[ti] = produced[ti];
    }
    samples.push_back(s);
  }
  stop = true;
  for (auto& th : producers) th.join();
  cleaner.Stop();
  const double seconds =
      std::chrono::duration<double>(Clock::now() - start).count();
  if (!cleaner.error().empty())
    errors_.push_back("log storage cleaner: " + cleaner.error());
  for (auto& t : topics) CheckHeads(t, "after the storage run");

  std::ofstream dat(fs::path(o_.out) / "log_storage.dat");
  dat << "# t rows_clean heap_clean total_clean rows_keep heap_keep total_keep "
         "produced_clean produced_keep\n";
  for (auto& s : samples) {
    dat << Fmt(s.t, 2) << " " << s.rows[0] << " " << s.heap[0] << " "
        << s.total[0] << " " << s.rows[1] << " " << s.heap[1] << " "
        << s.total[1] << " " << s.produced[0] << " " << s.produced[1] << "\n";
  }
  std::vector<Series> rows(2), size(2);
  const char* colors[] = {"#1f77b4", "#d62728"};
  const char* names[] = {"cleaner on (CompactLog every ", "no cleaner"};
  for (int ti = 0; ti < 2; ++ti) {
    rows[ti].name = size[ti].name =
        ti == 0 ? names[0] + Fmt(interval.count() / 1000.0, 1) + " s)"
                : names[1];
    rows[ti].color = size[ti].color = colors[ti];
    for (auto& s : samples) {
      rows[ti].points.push_back({s.t, (double)s.rows[ti]});
      size[ti].points.push_back({s.t, s.total[ti] / 1048576.0});
    }
  }
  WriteSvg(fs::path(o_.out) / "log_storage.svg",
           std::to_string(keys) + " keys, " + std::to_string(rate) +
               " produces/s per topic, retention " + Fmt(ret) +
               " s; sampled every second after VACUUM",
           {{"live message rows", rows},
            {"message table + indexes, MB (pg_total_relation_size)", size}});

  // The bound of issue 14's daemon test: keys + rate x (retention + 2 x
  // interval).
  const double bound = keys + rate * (ret + 2 * interval.count() / 1000.0);
  const double settle = ret + 2 * interval.count() / 1000.0;
  auto at = [&](double t) -> const Sample& {
    for (auto& s : samples)
      if (s.t >= t) return s;
    return samples.back();
  };
  std::int64_t max_rows = 0, max_total_late = 0,
               min_total_late = std::numeric_limits<std::int64_t>::max();
  for (auto& s : samples) {
    max_rows = std::max(max_rows, s.rows[0]);
    if (s.t >= settle) {
      max_total_late = std::max(max_total_late, s.total[0]);
      min_total_late = std::min(min_total_late, s.total[0]);
    }
  }
  if (max_total_late == 0) min_total_late = 0;
  log_md_.push_back("#### Storage bound\n");
  log_md_.push_back(
      std::to_string(keys) + " keys (1.." + std::to_string(keys) +
      ", one head each before the start), " +
      std::to_string(per_topic_threads) +
      " threads per topic producing compacted messages on random keys "
      "on a fixed schedule of " +
      std::to_string(rate) + " messages/s per topic, " + Fmt(seconds, 1) +
      " s, two topics side by side with retention " + Fmt(ret) +
      " s: `log-clean` with the cleaner "
      "(`CompactLog` every " +
      Fmt(interval.count() / 1000.0, 1) +
      " s = clamp(retention / 2, 1 s, 5 min), "
      "compactiond's sweep options: batch 1000, max_batches 100, batch_pause "
      "10 ms, duty_cycle 0.5), "
      "`log-keep` without. Every second: `VACUUM` of each message table, then "
      "`count(*)` and "
      "`pg_total_relation_size` (heap + indexes). Data: `log_storage.dat`; "
      "plot: `log_storage.svg`.\n");
  log_md_.push_back(
      "| t (s) | produced (clean / keep) | rows, cleaner on | rows, no cleaner "
      "| MB, cleaner on | MB, no cleaner |");
  log_md_.push_back("|---|---|---|---|---|---|");
  for (double t : {5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 1e9}) {
    if (t < 1e9 && t > samples.back().t - 0.5) continue;
    const Sample& s = at(t);
    log_md_.push_back("| " + Fmt(s.t) + " | " + std::to_string(s.produced[0]) +
                      " / " + std::to_string(s.produced[1]) + " | " +
                      std::to_string(s.rows[0]) + " | " +
                      std::to_string(s.rows[1]) + " | " +
                      Fmt(s.total[0] / 1048576.0, 2) + " | " +
                      Fmt(s.total[1] / 1048576.0, 2) + " |");
  }
  log_md_.push_back("");
  log_md_.push_back(
      "Cleaner on: at most " + std::to_string(max_rows) +
      " live rows (bound keys + rate x (retention + 2 x "
      "interval) = " +
      Fmt(bound) + ": " + (max_rows <= bound ? "held" : "**exceeded**") +
      "); after t = " + Fmt(settle) + " s the table's size stayed within " +
      Fmt(min_total_late / 1048576.0, 2) + ".." +
      Fmt(max_total_late / 1048576.0, 2) + " MB. " +
      std::to_string(cleaner.passes()) + " passes deleted " +
      std::to_string(cleaner.deleted()) + " messages, pass p50 " +
      Fmt(Median(cleaner.pass_ms()), 1) +
      " ms. No cleaner: " + std::to_string(samples.back().rows[1]) + " rows, " +
      Fmt(samples.back().total[1] / 1048576.0, 2) + " MB at the end.\n");
  std::fprintf(stderr,
               "  storage: cleaner max %lld rows (bound %.0f), end %.2f MB; no "
               "cleaner end %lld rows %.2f MB\n",
               (long long)max_rows, bound, samples.back().total[0] / 1048576.0,
               (long long)samples.back().rows[1],
               samples.back().total[1] / 1048576.0);
}

// (2) The writers' cost: produce and increment phases with the cleaner
// running (compactiond's interval and pacing for a 2 s retention, so it
// deletes all the time) and without, alternating ABBA.
void Bench::LogThroughput() {
  const std::string topic = "log-tput";
  const double ret = 2;
  const auto interval = CleanerInterval(ret);
  Client client =
      Client::Connect("", ClientOptions{o_.schema, 2, "bench-log-cleaner"});
  RegisterLogTopic(client, topic, ret);
  ResetCleaner(topic);
  Populate(topic, o_.keys);
  const double saved = o_.duration;
  o_.duration = o_.log_phase;
  const int threads = o_.log_threads;
  log_md_.push_back("#### Writers with the cleaner running vs not\n");
  log_md_.push_back(
      std::to_string(threads) + " threads on " + std::to_string(o_.keys) +
      " keys of topic `log-tput` (retention 2 s), " + Fmt(o_.log_phase, 1) +
      " s phases, " + std::to_string(o_.log_cycles) +
      " cycles per workload in ABBA order (no cleaner, cleaner; "
      "cleaner, no cleaner; ...). Cleaner phase: `CompactLog` every " +
      Fmt(interval.count() / 1000.0, 1) +
      " s (compactiond's interval for 2 s retention) with compactiond's sweep "
      "options; every pass "
      "deletes what the writers produced since the one before. VACUUM of head "
      "and message table "
      "before each phase. Ratio per cycle = cleaner phase / its no-cleaner "
      "neighbour.\n");
  log_md_.push_back(
      "| workload | tx/s no cleaner (per cycle) | tx/s cleaner | throughput "
      "ratio per cycle | median | "
      "p99 us no cleaner | p99 us cleaner | p99 ratio per cycle | median | "
      "deleted during cleaner phases |");
  log_md_.push_back("|---|---|---|---|---|---|---|---|---|---|");
  std::vector<std::string> cost;
  for (const std::string w : {"produce", "inc"}) {
    std::vector<double> tps[2], p99[2], rt, rp;
    std::int64_t deleted = 0;
    double clean_seconds = 0;
    if (pgss_) mon_.Exec("SELECT pg_stat_statements_reset()");
    for (int cycle = 0; cycle < o_.log_cycles; ++cycle) {
      double cyc_tps[2] = {0, 0}, cyc_p99[2] = {0, 0};
      for (int k = 0; k < 2; ++k) {
        const bool clean = (cycle % 2 == 0) ? k == 1 : k == 0;
        mon_.Exec("VACUUM " + Head(topic));
        mon_.Exec("VACUUM " + Msg(topic));
        std::unique_ptr<CleanerLoop> cleaner;
        if (clean)
          cleaner = std::make_unique<CleanerLoop>(client, topic, interval,
                                                  DaemonSweepOptions());
        Cell c = RunLibrary(w, threads, topic);
        if (cleaner) {
          cleaner->Stop();
          clean_seconds += c.seconds;
          deleted += cleaner->deleted();
          if (!cleaner->error().empty())
            errors_.push_back("log tput cleaner: " + cleaner->error());
        }
        cyc_tps[clean] = c.seconds > 0 ? c.tx / c.seconds : 0;
        cyc_p99[clean] = Percentiles(c.lat_us).p99;
        tps[clean].push_back(cyc_tps[clean]);
        p99[clean].push_back(cyc_p99[clean]);
      }
      if (cyc_tps[0] > 0) rt.push_back(cyc_tps[1] / cyc_tps[0]);
      if (cyc_p99[0] > 0) rp.push_back(cyc_p99[1] / cyc_p99[0]);
    }
    log_md_.push_back(
        "| " +
        std::string(w == "inc" ? "increment (lock + produce)" : "produce") +
        " | " + Join(tps[0], 0) + " | " + Join(tps[1], 0) + " | " +
        Join(rt, 2) + " | **" + Fmt(Median(rt), 2) + "** (goal >= 0.90) | " +
        Join(p99[0], 0) + " | " + Join(p99[1], 0) + " | " + Join(rp, 2) +
        " | **" + Fmt(Median(rp), 2) + "**" +
        (w == "inc" ? " (goal <= 1.15)" : "") + " | " +
        std::to_string(deleted) + " |");
    std::fprintf(
        stderr,
        "  log tput %s: throughput ratio median %.2f, p99 ratio median %.2f\n",
        w.c_str(), Median(rt), Median(rp));
    // What the cleaner cost the server: its statements' execution time
    // (the topic's only CompactLog, so pg_stat_statements has just its).
    if (pgss_ && clean_seconds > 0) {
      Res r = mon_.Exec(
          "SELECT coalesce(sum(total_exec_time), 0), "
          "coalesce(sum(total_exec_time) FILTER (WHERE query LIKE "
          "'%compaction:CompactLog:messages%'), 0), "
          "coalesce(sum(shared_blks_hit + shared_blks_read) "
          "FILTER (WHERE query LIKE '%compaction:CompactLog:messages%'), 0) "
          "FROM pg_stat_statements "
          "WHERE query LIKE '%log_cleaner_state%' OR query LIKE "
          "'%compaction:CompactLog%'");
      const double all_ms = std::stod(PQgetvalue(r.get(), 0, 0)),
                   msg_ms = std::stod(PQgetvalue(r.get(), 0, 1));
      const double blks = std::stod(PQgetvalue(r.get(), 0, 2));
      const double rows = std::max<std::int64_t>(deleted, 1);
      cost.push_back(
          "| " + w + " | " + Fmt(clean_seconds, 1) + " | " +
          std::to_string(deleted) + " | " + Fmt(deleted / clean_seconds) +
          " | " + Fmt(all_ms / 1000 / clean_seconds, 2) + " | " +
          Fmt(1000 * msg_ms / rows, 1) + " | " + Fmt(blks / rows, 1) + " |");
    }
  }
  log_md_.push_back("");
  if (!cost.empty()) {
    log_md_.push_back(
        "The cleaner's own cost in those phases (pg_stat_statements over its "
        "statements; execution time, "
        "not waiting for a client):\n");
    log_md_.push_back(
        "| workload | cleaner phase s | rows deleted | rows/s | server s per s "
        "(cores) | messages step us per "
        "deleted row | buffers per deleted row |");
    log_md_.push_back("|---|---|---|---|---|---|---|");
    for (auto& c : cost) log_md_.push_back(c);
    log_md_.push_back("");
  }
  CheckHeads(topic, "after the throughput phases");
  o_.duration = saved;
}

// (3a) Delete rate: the same log built before each method: keys with many
// versions each (interleaved in id order, as writers leave them), all out
// of retention; the non-heads removed by one unbounded DELETE or by
// CompactLog passes.
void Bench::LogDeleteRate() {
  const std::string topic = "log-del";
  const int keys = o_.short_mode ? 100 : 10000;
  const long versions = o_.log_removable / keys + 1;
  const long removable = (versions - 1) * keys;
  Client client =
      Client::Connect("", ClientOptions{o_.schema, 2, "bench-log-cleaner"});
  RegisterLogTopic(client, topic, 600);  // 10 min; the data is 1 h old
  auto build = [&] {
    ResetCleaner(topic);
    const auto t0 = Clock::now();
    mon_.Exec(
        "INSERT INTO " + Msg(topic) +
        " (message_key, schema_version, compaction_rank, payload, created_at) "
        "SELECT (i % " +
        std::to_string(keys) +
        ")::text, 1, 0, jsonb_build_object('value', i), "
        "now() - interval '1 hour' + i * interval '1 microsecond' FROM "
        "generate_series(0, " +
        std::to_string(keys * versions - 1) + ") i");
    mon_.Exec(
        "INSERT INTO " + Head(topic) +
        " (message_key, head_id, schema_version, compaction_rank, created_at, "
        "updated_at, idle_since) SELECT message_key, max(id), 1, 0, now(), "
        "now(), NULL FROM " +
        Msg(topic) + " GROUP BY message_key");
    mon_.Exec("VACUUM ANALYZE " + Msg(topic));
    mon_.Exec("VACUUM ANALYZE " + Head(topic));
    return std::chrono::duration<double>(Clock::now() - t0).count();
  };
  // `diag`: the same with enable_bitmapscan off for the cleaner's sessions
  // (a diagnostic of the older-versions scan, RESULTS.md run H-log).
  struct Method {
    std::string name;
    int batch;
    bool daemon;
    bool once;
    bool diag;
  };
  const std::vector<Method> methods = {
      {"one unbounded DELETE", 0, false, false, false},
      {"CompactLog batch 1000, unpaced", 1000, false, false, false},
      {"CompactLog batch 10000, unpaced", 10000, false, true, false},
      {"CompactLog, compactiond's options (batch 1000, pause 10 ms, duty 0.5)",
       1000, true, true, false},
      {"CompactLog batch 1000, unpaced, enable_bitmapscan = off (diagnostic)",
       1000, false, true, true}};
  std::map<std::string, std::vector<double>> rates, walb;
  std::map<std::string, std::string> done_rows;
  std::map<std::string, int> passes;
  std::string statements;
  double build_s = 0;
  for (int round = 0; round < o_.log_delete_rounds; ++round) {
    for (const Method& m : methods) {
      if (m.once && round > 0) continue;
      build_s = build();
      if (m.diag)
        mon_.Exec("ALTER ROLE CURRENT_USER SET enable_bitmapscan = off");
      Client cleaner_client =
          Client::Connect("", ClientOptions{o_.schema, 2, "bench-log-cleaner"});
      if (pgss_) mon_.Exec("SELECT pg_stat_statements_reset()");
      const std::int64_t wal0 = Snapshot().wal;
      const auto t0 = Clock::now();
      std::int64_t deleted = 0;
      int np = 0;
      bool capped = false;
      if (m.batch == 0) {
        Res r = mon_.Exec(
            "DELETE FROM " + Msg(topic) +
                " m WHERE m.created_at < now() - (SELECT retention_ms FROM " +
                q_ +
                ".topic WHERE name = $1) * interval '1 millisecond' AND NOT "
                "EXISTS (SELECT 1 FROM " +
                Head(topic) +
                " h WHERE h.message_key = m.message_key AND h.head_id = m.id)",
            {topic});
        deleted = std::stoll(PQcmdTuples(r.get()));
        np = 1;
      } else {
        compaction::Janitor janitor(cleaner_client);
        compaction::SweepOptions so =
            m.daemon ? DaemonSweepOptions() : compaction::SweepOptions{};
        so.batch_size = m.batch;
        // Passes of 100,000 rows, so the time cap is checked between them.
        so.max_batches = std::max(1, 100000 / m.batch);
        so.statement_timeout = std::chrono::minutes(5);
        for (;;) {
          auto r = janitor.CompactLog(topic, so);
          deleted += r.deleted;
          ++np;
          if (r.deleted == 0 && !r.stopped_at_limit) break;
          if (std::chrono::duration<double>(Clock::now() - t0).count() >
              o_.log_delete_cap) {
            capped = true;
            break;
          }
        }
      }
      const double s = std::chrono::duration<double>(Clock::now() - t0).count();
      const std::int64_t wal = Snapshot().wal - wal0;
      if (m.diag) mon_.Exec("ALTER ROLE CURRENT_USER RESET enable_bitmapscan");
      if (round == 0 && m.batch == 1000 && !m.daemon && !m.diag)
        statements = CleanerStatements();
      const std::int64_t left = mon_.Int("SELECT count(*) FROM " + Msg(topic));
      if (!capped && (deleted != removable || left != keys)) {
        errors_.push_back(
            "log delete " + m.name + ": deleted " + std::to_string(deleted) +
            " of " + std::to_string(removable) + ", " + std::to_string(left) +
            " rows left (want " + std::to_string(keys) + ")");
      }
      CheckHeads(topic, "after " + m.name);
      rates[m.name].push_back(deleted / s);
      walb[m.name].push_back((double)wal / std::max<std::int64_t>(deleted, 1));
      passes[m.name] = np;
      done_rows[m.name] += (done_rows[m.name].empty() ? "" : " / ") +
                           std::to_string(deleted) + " in " + Fmt(s, 1) + " s" +
                           (capped ? " (time cap)" : "");
      std::fprintf(stderr,
                   "  log delete %s: %lld rows in %.2f s (%.0f rows/s, build "
                   "%.1f s)%s\n",
                   m.name.c_str(), (long long)deleted, s, deleted / s, build_s,
                   capped ? " TIME CAP" : "");
    }
  }
  const double base = Median(rates[methods[0].name]);
  log_md_.push_back("#### Delete rate\n");
  log_md_.push_back(
      std::to_string(removable) + " removable messages: " +
      std::to_string(keys) + " keys x " + std::to_string(versions) +
      " versions, interleaved in id order (version v of every key before "
      "version v + 1), created_at 1 h ago, retention 10 min; the head table "
      "names each key's last "
      "version (" +
      std::to_string(keys) +
      " heads). Built before every method with `INSERT .. SELECT "
      "generate_series` into the message and head tables and `VACUUM ANALYZE` "
      "(" +
      Fmt(build_s, 1) +
      " s), the cleaner's position reset to 0. The DELETE is the statement an "
      "operator would write: "
      "`DELETE FROM message m WHERE created_at < now() - retention AND NOT "
      "EXISTS (head naming m)`. "
      "CompactLog passes of 100,000 rows (max_batches = 100,000 / batch) until "
      "one deletes nothing, "
      "stopped after " +
      Fmt(o_.log_delete_cap) +
      " s (time cap: the rate is then over the part that ran). " +
      std::to_string(o_.log_delete_rounds) +
      " rounds of the DELETE and batch 1000 (in that order), the other "
      "methods once (after round 1's).\n");
  log_md_.push_back(
      "| method | rows deleted, seconds (per round) | rows/s per round | "
      "median rows/s | ratio to the DELETE | WAL bytes/row | passes |");
  log_md_.push_back("|---|---|---|---|---|---|---|");
  for (const Method& m : methods) {
    const double r = Median(rates[m.name]);
    log_md_.push_back("| " + m.name + " | " + done_rows[m.name] + " | " +
                      Join(rates[m.name], 0) + " | " + Fmt(r) + " | " +
                      (base > 0 ? Fmt(r / base, 2) : "-") + " | " +
                      Fmt(Median(walb[m.name])) + " | " +
                      std::to_string(passes[m.name]) + " |");
  }
  log_md_.push_back("");
  log_md_.push_back(
      "Server-side cost of the cleaner's statements in round 1, batch 1000 "
      "(pg_stat_statements):\n");
  log_md_.push_back(statements);
  ResetCleaner(topic);
}

// (3b) A pass with nothing to delete over a log of only heads, at growing
// sizes: passes until the position is final, then timed passes.
void Bench::LogIdlePass() {
  const std::string topic = "log-idle";
  Client client =
      Client::Connect("", ClientOptions{o_.schema, 2, "bench-log-cleaner"});
  RegisterLogTopic(client, topic, 600);
  ResetCleaner(topic);
  compaction::Janitor janitor(client);
  const compaction::SweepOptions
      so;  // the library's defaults: batch 1000, max_batches 1000
  const int timed = o_.short_mode ? 5 : 21;
  log_md_.push_back("#### A pass with nothing to delete\n");
  log_md_.push_back(
      "A log of heads only (one message per key, every message its key's head, "
      "created_at 1 h ago, "
      "retention 10 min, so every message is out of retention but none is "
      "removable), grown to each "
      "size with `INSERT .. SELECT generate_series` into the message and head "
      "tables (1,000,000 rows "
      "per statement; building through Produce would take hours on this "
      "machine), then "
      "`VACUUM ANALYZE`. `CompactLog` with the library's default options "
      "(batch 1000, max_batches "
      "1000, unpaced) runs until the cleaner's position "
      "(log_cleaner_state.position) is final at the last id, then " +
      std::to_string(timed) +
      " timed passes (wall clock "
      "of the call: claim, two walks, bookkeeping).\n");
  log_md_.push_back(
      "| heads | build s | first pass: ms, rows walked | passes until final, "
      "total s | idle pass p50 ms | max ms | goal <= 50 ms |");
  log_md_.push_back("|---|---|---|---|---|---|---|");
  long have = 0;
  std::string last_statements;
  auto state = [&] {
    Res r = mon_.Exec("SELECT position, coalesce(pending_position, -1) FROM " +
                          q_ + ".log_cleaner_state WHERE topic_id = $1",
                      {std::to_string(TopicId(topic))});
    return std::make_pair(std::stoll(PQgetvalue(r.get(), 0, 0)),
                          std::stoll(PQgetvalue(r.get(), 0, 1)));
  };
  std::vector<long> sizes =
      o_.short_mode ? std::vector<long>{1000, 10000} : o_.log_heads;
  for (long size : sizes) {
    const auto b0 = Clock::now();
    for (long from = have + 1; from <= size; from += 1000000) {
      const long to = std::min(size, from + 999999);
      mon_.Exec("WITH m AS (INSERT INTO " + Msg(topic) +
                " (message_key, schema_version, compaction_rank, payload, "
                "created_at) SELECT 'h' || i, 1, 0, '{\"value\": 0}', now() - "
                "interval '1 hour' FROM "
                "generate_series(" +
                std::to_string(from) + ", " + std::to_string(to) +
                ") i RETURNING id, message_key) "
                "INSERT INTO " +
                Head(topic) +
                " (message_key, head_id, schema_version, compaction_rank, "
                "created_at, "
                "updated_at, idle_since) SELECT message_key, id, 1, 0, now(), "
                "now(), NULL FROM m");
    }
    const std::int64_t walked_before = state().first;
    mon_.Exec("VACUUM ANALYZE " + Msg(topic));
    mon_.Exec("VACUUM ANALYZE " + Head(topic));
    const double build_s =
        std::chrono::duration<double>(Clock::now() - b0).count();
    // Until final: the position reaches the last id. A pass that moves
    // nothing is not the end while another transaction (another test's, in
    // CI) was running when the position went pending: the position turns
    // final only after that transaction ends, so keep passing, bounded.
    const std::int64_t last_id =
        mon_.Int("SELECT coalesce(max(id), 0) FROM " + Msg(topic));
    const auto c0 = Clock::now();
    double first_ms = 0;
    std::int64_t first_walked = 0;
    int np = 0;
    auto prev = state();
    for (;;) {
      const auto t0 = Clock::now();
      auto r = janitor.CompactLog(topic, so);
      const double ms =
          std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
      ++np;
      if (r.deleted)
        errors_.push_back("log idle: a pass deleted " +
                          std::to_string(r.deleted));
      auto now = state();
      if (np == 1) {
        first_ms = ms;
        first_walked = std::max(now.first, now.second) - walked_before;
      }
      const bool moved = now != prev || r.stopped_at_limit;
      prev = now;
      if (now.first == last_id && !moved) break;
      if (Clock::now() - c0 > std::chrono::seconds(60)) {
        errors_.push_back("log idle: position " + std::to_string(now.first) +
                          " not final (last id " + std::to_string(last_id) +
                          ") after 60 s, " + std::to_string(np) + " passes");
        break;
      }
      // Waiting for another transaction to end: do not spin on the server.
      if (!moved) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    const double until_final_s =
        std::chrono::duration<double>(Clock::now() - c0).count();
    if (pgss_) mon_.Exec("SELECT pg_stat_statements_reset()");
    std::vector<double> ms;
    for (int i = 0; i < timed; ++i) {
      const auto t0 = Clock::now();
      auto r = janitor.CompactLog(topic, so);
      ms.push_back(
          std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
      if (r.deleted)
        errors_.push_back("log idle: a timed pass deleted " +
                          std::to_string(r.deleted));
    }
    const std::string statements = CleanerStatements();
    const double p50 = Median(ms), mx = *std::max_element(ms.begin(), ms.end());
    log_md_.push_back("| " + std::to_string(size) + " | " + Fmt(build_s, 1) +
                      " | " + Fmt(first_ms, 0) + " ms, " +
                      std::to_string(first_walked) + " | " +
                      std::to_string(np) + ", " + Fmt(until_final_s, 1) +
                      " | **" + Fmt(p50, 2) + "** | " + Fmt(mx, 2) + " | " +
                      (p50 <= 50 ? "met" : "**missed**") + " |");
    last_statements =
        "Server-side cost of the " + std::to_string(timed) +
        " timed passes at " + std::to_string(size) +
        " heads (pg_stat_statements; each pass's statements):\n\n" + statements;
    std::fprintf(stderr,
                 "  log idle %ld heads: build %.1f s, first pass %.0f ms, %d "
                 "passes to final (%.1f s), idle p50 %.2f ms\n",
                 size, build_s, first_ms, np, until_final_s, p50);
    have = size;
    CheckHeads(topic, "after the idle passes");
  }
  log_md_.push_back("");
  log_md_.push_back(last_statements);
}

// ------------------------------------------------------------ batches
// Producer::ProduceBatch of o_.batch compacted messages over o_.keys keys
// against single Produce (the same messages one per call) and against
// pgbench running the batch statement the library sends. Messages/s is the
// measure: one batch transaction carries o_.batch messages.

// The library's batch statement (lib/src/produce_batch.cpp) without its
// marker comment, with the parameters as pgbench variables.
std::string BatchSql(const std::string& function, const std::string& keys,
                     const std::string& repeated) {
  return "SELECT p.message_id, (extract(epoch FROM CASE WHEN "
         "p.message_created_at IS NULL THEN NULL ELSE "
         "least(greatest(p.message_created_at, '1900-01-01 "
         "00:00+00'::timestamptz), '2200-01-01 00:00+00'::timestamptz) END) * "
         "1e6)::bigint, p.advanced FROM " +
         function + "(:" + keys +
         "::text[], :svs::integer[], :ranks::bigint[], :payloads::jsonb[], :" +
         repeated + "::text[]) p;";
}

// n random keys of 1..keys as the text[] literals the library sends: the
// keys, and those drawn more than once (every message is compacted).
struct KeyArrays {
  std::string keys, repeated;
};
KeyArrays DrawKeys(std::mt19937_64& rng, int n, int keys) {
  std::map<int, int> drawn;
  KeyArrays out{"{", "{"};
  for (int i = 0; i < n; ++i) {
    const int k = std::uniform_int_distribution<int>(1, keys)(rng);
    out.keys += (i ? ",\"" : "\"") + std::to_string(k) + "\"";
    if (++drawn[k] == 2) {
      out.repeated +=
          (out.repeated.size() > 1 ? ",\"" : "\"") + std::to_string(k) + "\"";
    }
  }
  out.keys += '}';
  out.repeated += '}';
  return out;
}

std::string Repeat(const std::string& item, int n) {
  std::string out = "{";
  for (int i = 0; i < n; ++i) out += (i ? "," : "") + item;
  return out + "}";
}

void Bench::SetupBatch() {
  Client c = Client::Connect("", ClientOptions{o_.schema, 1, "bench-setup"});
  c.Topic<Counter>("batch").Register();
  Populate("batch", o_.keys);
  for (auto& tab : {Head("batch"), Msg("batch")}) {
    mon_.Exec("ALTER TABLE " + tab + " SET (autovacuum_enabled = false)");
    mon_.Exec("VACUUM ANALYZE " + tab);
  }
}

// batch == 0: single Produce calls.
Cell Bench::RunBatchLibrary(int threads, int batch) {
  const std::string app = "bench-lib";
  return Measure(
      "batch", batch ? "library-batch" : "library-single", threads, app,
      [&](Cell& cell) {
        Client client =
            Client::Connect("", ClientOptions{o_.schema, threads, app});
        auto producer = client.Topic<Counter>("batch").RegisterProducer();
        const int keys = o_.keys;
        struct S {
          std::vector<compaction::Outgoing<Counter>> batch;
        };
        Workers(
            cell, threads, [](int) { return std::make_unique<S>(); },
            [&](S& s, std::mt19937_64& rng, std::int64_t&) {
              auto key = [&] {
                return std::to_string(
                    std::uniform_int_distribution<int>(1, keys)(rng));
              };
              if (batch == 0) {
                producer.Produce(Counter{1},
                                 ProduceOptions{key(), CompactionOptions{0}});
                return;
              }
              s.batch.clear();
              for (int i = 0; i < batch; ++i) {
                s.batch.push_back(
                    {Counter{1}, ProduceOptions{key(), CompactionOptions{0}}});
              }
              producer.ProduceBatch(s.batch);
            });
      });
}

// pgbench picks one of kScripts scripts per transaction, each with its own
// pre-drawn key array (pgbench has no string functions to draw one).
Cell Bench::RunBatchPgbench(int threads, int batch) {
  constexpr int kScripts = 64;
  const std::string app = "bench-pgbench";
  const fs::path dir = fs::path(o_.out) / "pgbench";
  fs::create_directories(dir);
  std::mt19937_64 rng(0xba7c4 + 7 * ++cell_seq_);
  const std::string function =
      q_ + ".produce_batch_" + std::to_string(TopicId("batch"));
  std::string files, defines;
  for (int i = 0; i < kScripts; ++i) {
    const std::string var = "keys" + std::to_string(i);
    const std::string repeated = "repeated" + std::to_string(i);
    const fs::path f = dir / ("batch_" + std::to_string(i) + ".sql");
    std::ofstream(f) << BatchSql(function, var, repeated) << "\n";
    files += " -f " + f.string();
    const KeyArrays drawn = DrawKeys(rng, batch, o_.keys);
    defines += " -D '" + var + "=" + drawn.keys + "' -D '" + repeated + "=" +
               drawn.repeated + "'";
  }
  defines += " -D 'svs=" + Repeat("1", batch) +
             "' -D 'ranks=" + Repeat("0", batch) +
             "' -D 'payloads=" + Repeat("\"{\\\"value\\\":1}\"", batch) + "'";
  return Measure("batch", "pgbench-batch", threads, app, [&](Cell& cell) {
    const std::string cmd =
        "PGAPPNAME=" + app + " " + o_.pgbench + " -n -M prepared -c " +
        std::to_string(threads) + " -j " + std::to_string(threads) + " -T " +
        std::to_string(std::max(1, (int)std::lround(o_.duration))) + defines +
        files + " 2>&1";
    FILE* p = popen(cmd.c_str(), "r");
    std::string out;
    char buf[4096];
    while (size_t n = fread(buf, 1, sizeof buf, p)) out.append(buf, n);
    const int rc = pclose(p);
    std::smatch m;
    double tps = 0;
    if (std::regex_search(
            out, m,
            std::regex(
                R"(tps = ([0-9.]+) \(without initial connection time\))")))
      tps = std::stod(m[1]);
    if (std::regex_search(
            out, m,
            std::regex(
                R"(number of transactions actually processed: ([0-9]+))")))
      cell.tx = std::stoll(m[1]);
    if (std::regex_search(out, m,
                          std::regex(R"(latency average = ([0-9.]+) ms)")))
      cell.lat_us.assign(1, std::stod(m[1]) * 1000);
    cell.seconds = tps > 0 ? cell.tx / tps : o_.duration;
    if (rc != 0 || tps == 0) {
      ++cell.errors;
      cell.note = "pgbench failed: " + out.substr(0, 600);
    }
  });
}

void Bench::BatchSection() {
  SetupBatch();
  const int batch = o_.batch;
  std::vector<Cell> cells;
  std::fprintf(stderr, "workload batch (%d messages)\n", batch);
  for (int threads : o_.batch_threads) {
    for (int round = 0; round < o_.rounds; ++round) {
      std::vector<std::string> order = {"library-batch", "pgbench-batch",
                                        "library-single"};
      if (round % 2 == 1) std::reverse(order.begin(), order.end());
      for (const auto& v : order) {
        Cell c = v == "library-batch"    ? RunBatchLibrary(threads, batch)
                 : v == "library-single" ? RunBatchLibrary(threads, 0)
                                         : RunBatchPgbench(threads, batch);
        c.round = round;
        cells.push_back(std::move(c));
      }
    }
  }
  batch_md_.push_back(
      "ProduceBatch of " + std::to_string(batch) +
      " compacted messages (random keys of " + std::to_string(o_.keys) +
      ", rank 0) against single Produce calls and against pgbench -M "
      "prepared running the batch statement; " +
      Fmt(o_.duration, 1) + " s cells, " + std::to_string(o_.rounds) +
      " rounds alternating the order. messages/s = transactions x messages "
      "per transaction / seconds; CPU per message over the whole cell.\n");
  batch_md_.push_back(
      "| threads | variant | messages/s | per round | p50 us/tx | client CPU "
      "us/msg | server CPU us/msg | batch / single [per round] | library / "
      "pgbench [per round] |");
  batch_md_.push_back("|---|---|---|---|---|---|---|---|---|");
  for (int threads : o_.batch_threads) {
    std::map<std::string, std::vector<double>> rate;  // per round
    std::map<std::string, double> msgs, secs, ccpu, scpu;
    std::map<std::string, std::vector<double>> lat;
    for (const Cell& c : cells) {
      if (c.threads != threads) continue;
      const double per = c.variant == "library-single" ? 1 : batch;
      rate[c.variant].push_back(c.seconds > 0 ? c.tx * per / c.seconds : 0);
      msgs[c.variant] += (c.tx + c.extra_tx) * per;
      secs[c.variant] += c.seconds;
      ccpu[c.variant] += c.client_cpu;
      scpu[c.variant] += c.server_cpu;
      lat[c.variant].insert(lat[c.variant].end(), c.lat_us.begin(),
                            c.lat_us.end());
    }
    auto ratios = [&](const std::string& a, const std::string& b) {
      std::string per;
      double sum_a = 0, sum_b = 0;
      for (size_t i = 0; i < rate[a].size() && i < rate[b].size(); ++i) {
        per += (i ? " / " : "") +
               (rate[b][i] > 0 ? Fmt(rate[a][i] / rate[b][i], 2) : "-");
        sum_a += rate[a][i];
        sum_b += rate[b][i];
      }
      return (sum_b > 0 ? "**" + Fmt(sum_a / sum_b, 2) + "**" : "-") + " [" +
             per + "]";
    };
    for (const std::string v :
         {"library-batch", "pgbench-batch", "library-single"}) {
      if (!rate.count(v)) continue;
      double all = 0;
      std::string rounds;
      for (size_t i = 0; i < rate[v].size(); ++i) {
        all += rate[v][i];
        rounds += (i ? " / " : "") + Fmt(rate[v][i]);
      }
      const double n = std::max(1.0, msgs[v]);
      batch_md_.push_back(
          "| " + std::to_string(threads) + " | " + v + " | " +
          Fmt(all / rate[v].size()) + " | " + rounds + " | " +
          Fmt(Percentiles(lat[v]).p50) + " | " + Fmt(1e6 * ccpu[v] / n, 1) +
          " | " + Fmt(1e6 * scpu[v] / n, 1) + " | " +
          (v == "library-batch" ? ratios(v, "library-single") : "") + " | " +
          (v == "library-batch" ? ratios(v, "pgbench-batch") : "") + " |");
    }
  }
  batch_md_.push_back(
      "\npgbench's p50 is its average latency (no per-transaction log: 64 "
      "scripts, each with its own pre-drawn key array, since pgbench cannot "
      "build one).");
}

struct Agg {
  std::int64_t tx = 0, commits = 0, retries = 0, errors = 0;
  double seconds = 0, client_cpu = 0, server_cpu = 0, client_csw = 0;
  std::vector<double> lat, per_round;
  TableStats d;
};

void Bench::Report() {
  const std::vector<std::string> workloads = {"inc", "hot", "new", "read",
                                              "produce"};
  const std::map<std::string, std::string> title = {
      {"inc",
       "(1) increment: LockCompactionHead + ProduceInTx + commit, 10,000 "
       "uniform keys"},
      {"hot", "(2) increment on one hot key"},
      {"new", "(3) lock-only on always-new keys (headless-row creation)"},
      {"read", "(4) plain CompactionHead reads, 10,000 keys"},
      {"produce", "(5) compacted Produce without a lock, 10,000 keys"}};
  const std::vector<std::string> variants = {
      "library",      "library-unnamed",  "library-nocheck",
      "pgbench",      "pgbench-extended", "advisory",
      "serializable", "conditional",      "upsert-lock"};
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
     << " rounds alternating the variant order; tx/s = all transactions / all "
        "seconds of the rounds; "
        "p50/p99 over every transaction of all rounds; retries, dead tuples "
        "(net n_dead_tup growth after HOT pruning), "
        "updates (n_tup_upd, HOT share) and WAL bytes per committed "
        "transaction; ratio = tx/s / pgbench tx/s "
        "(per-round ratios in brackets).\n\n";
  std::map<std::string, std::map<int, std::map<std::string, double>>> tput;
  for (auto& w : workloads) {
    bool any = false;
    for (auto& [k, a] : agg) any |= std::get<0>(k) == w;
    if (!any) continue;
    md << "#### " << title.at(w) << "\n\n"
       << "| threads | variant | tx/s | per round | p50 us | p99 us | "
          "retries/tx | dead/tx | upd/tx (HOT %) | WAL B/tx | client CPU us/tx "
          "| client ctx switches/tx | server CPU us/tx | ratio to pgbench [per "
          "round] |\n"
       << "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
    for (int t : o_.threads) {
      auto pit = agg.find({w, "pgbench", t});
      const double pg_tps = pit != agg.end() && pit->second.seconds > 0
                                ? pit->second.tx / pit->second.seconds
                                : 0;
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
          if (pit != agg.end() && i < pit->second.per_round.size() &&
              pit->second.per_round[i] > 0)
            rr += (i ? " / " : "") +
                  Fmt(a.per_round[i] / pit->second.per_round[i], 2);
        }
        md << "| " << t << " | " << v << (a.errors ? " (ERRORS)" : "") << " | "
           << Fmt(tps) << " | " << rounds << " | " << Fmt(d.p50) << " | "
           << Fmt(d.p99) << " | " << Fmt(a.retries / n, 3) << " | "
           << Fmt(a.d.dead / n, 2) << " | " << Fmt(a.d.upd / n, 2) << " ("
           << Fmt(a.d.upd ? 100.0 * a.d.hot / a.d.upd : 0) << " %) | "
           << Fmt(a.d.wal / n) << " | " << Fmt(1e6 * a.client_cpu / n, 1)
           << " | " << Fmt(a.client_csw / n, 2) << " | "
           << Fmt(1e6 * a.server_cpu / n, 1) << " | "
           << (v == "pgbench" || pg_tps == 0
                   ? std::string("1")
                   : Fmt(tps / pg_tps, 2) + " [" + rr + "]")
           << " |\n";
      }
    }
    md << "\n";
    std::ofstream dat(fs::path(o_.out) / ("throughput_" + w + ".dat"));
    dat << "threads";
    std::vector<std::string> present;
    for (auto& v : variants)
      if (tput[w].begin() != tput[w].end() && tput[w].begin()->second.count(v))
        present.push_back(v);
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
  md << "### Headline ratios at " << top
     << " threads\n\n| workload | library / pgbench |";
  for (auto& v : {"advisory", "serializable", "conditional", "upsert-lock"})
    md << " seed / " << v << " |";
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
      for (size_t i = 0;
           i < li->second.per_round.size() && i < pi->second.per_round.size();
           ++i)
        if (pi->second.per_round[i] > 0)
          r.push_back(li->second.per_round[i] / pi->second.per_round[i]);
      if (!r.empty()) {
        std::sort(r.begin(), r.end());
        med = Fmt(r.size() % 2 ? r[r.size() / 2]
                               : (r[r.size() / 2 - 1] + r[r.size() / 2]) / 2,
                  2);
      }
    }
    md << "| " << w << " | "
       << (m["pgbench"] > 0 ? Fmt(m["library"] / m["pgbench"], 2) : "-")
       << " (median of rounds " << med << ") |";
    for (auto& v : {"advisory", "serializable", "conditional", "upsert-lock"})
      md << " " << (m.count(v) && m[v] > 0 ? Fmt(m["library"] / m[v], 2) : "-")
         << " |";
    md << "\n";
  }
  if (!lockforms_md_.empty()) {
    md << "\n### LockCompactionHead forms\n\n";
    for (auto& s : lockforms_md_) md << s << "\n";
  }
  if (!batch_md_.empty()) md << "\n### Batches\n\n";
  for (auto& s : batch_md_) md << s << "\n";
  md << "\n### Janitor\n\n";
  for (auto& s : janitor_md_) md << s << "\n";
  md << "\n### Stats\n\n";
  for (auto& s : stats_md_) md << s << "\n";
  md << "\n### Log compaction\n\n";
  for (auto& s : log_md_) md << s << "\n";
  md << "\n### Errors\n\n";
  if (errors_.empty()) md << "none\n";
  for (auto& e : errors_) md << "- " << e << "\n";

  std::ofstream gp(fs::path(o_.out) / "plot.gp");
  gp << "set terminal pngcairo size 1500,900 font ',10'\nset output "
        "'throughput.png'\n"
        "set multiplot layout 2,3 title 'libcompaction vs pgbench (same SQL) "
        "vs rejected designs: throughput by client threads'\n"
        "set logscale x 2\nset xtics (1,4,16)\nset xrange [0.8:20]\nset yrange "
        "[0:*]\nset key top left font ',8'\n"
        "set grid\nset xlabel 'client threads'\nset ylabel 'tx/s'\n";
  for (auto& w : workloads) {
    if (!tput.count(w)) continue;
    gp << "set title '" << title.at(w) << "' font ',9'\n"
       << "plot for [i=2:*] 'throughput_" << w
       << ".dat' using 1:i with linespoints lw 2 title columnheader(i)\n";
  }
  gp << "unset multiplot\n";
}

int Bench::Run() {
  fs::create_directories(o_.out);
  const auto t0 = Clock::now();
  PrintSettings();
  Setup();
  auto want = [&](const std::string& s) {
    return (o_.only.empty() || o_.only.count(s)) && !o_.skip.count(s);
  };
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
  if (o_.only.count("lockforms")) {
    section("lockforms", [&] { LockFormsSection(); });
  }
  if (want("batch")) section("batch", [&] { BatchSection(); });
  if (want("janitor")) section("janitor", [&] { JanitorSection(); });
  if (want("stats")) section("stats", [&] { StatsSection(); });
  const bool any_log = o_.only.empty() || o_.only.count("log") ||
                       o_.only.count("log-storage") ||
                       o_.only.count("log-tput") ||
                       o_.only.count("log-delete") || o_.only.count("log-idle");
  if (any_log && !o_.skip.count("log")) section("log", [&] { LogSection(); });
  if (o_.short_mode) mon_.Exec("DROP SCHEMA IF EXISTS " + q_ + " CASCADE");
  std::fprintf(stderr, "done in %.0f s; report: %s/report.md\n",
               std::chrono::duration<double>(Clock::now() - t0).count(),
               o_.out.c_str());
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
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        std::exit(2);
      }
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
      o.log_seconds = 3;
      o.log_retention_s = 1;
      o.log_rate = 100;
      o.log_keys = 100;
      o.log_phase = 0.5;
      o.log_cycles = 2;
      o.log_threads = 4;
      o.log_removable = 10000;
      o.log_delete_rounds = 1;
      o.log_delete_cap = 20;
    } else if (a == "--out")
      o.out = next();
    else if (a == "--duration")
      o.duration = std::stod(next());
    else if (a == "--rounds")
      o.rounds = std::stoi(next());
    else if (a == "--threads")
      o.threads = ParseInts(next());
    else if (a == "--janitor-rows")
      o.janitor_rows = std::stol(next());
    else if (a == "--topics")
      o.topics = std::stoi(next());
    else if (a == "--janitor-cap")
      o.janitor_cap = std::stod(next());
    else if (a == "--pgbench")
      o.pgbench = next();
    else if (a == "--scripts")
      o.scripts = next();
    else if (a == "--only") {
      std::stringstream ss(next());
      for (std::string x; std::getline(ss, x, ',');) o.only.insert(x);
    } else if (a == "--skip") {
      std::stringstream ss(next());
      for (std::string x; std::getline(ss, x, ',');) o.skip.insert(x);
    } else if (a == "--log-seconds")
      o.log_seconds = std::stod(next());
    else if (a == "--log-rate")
      o.log_rate = std::stoi(next());
    else if (a == "--log-phase")
      o.log_phase = std::stod(next());
    else if (a == "--log-cycles")
      o.log_cycles = std::stoi(next());
    else if (a == "--log-removable")
      o.log_removable = std::stol(next());
    else if (a == "--log-delete-rounds")
      o.log_delete_rounds = std::stoi(next());
    else if (a == "--log-delete-cap")
      o.log_delete_cap = std::stod(next());
    else if (a == "--log-heads") {
      o.log_heads.clear();
      for (int x : ParseInts(next())) o.log_heads.push_back(x);
    } else if (a == "--batch")
      o.batch = std::stoi(next());
    else if (a == "--batch-threads")
      o.batch_threads = ParseInts(next());
    else if (a == "--variants") {
      std::stringstream ss(next());
      for (std::string x; std::getline(ss, x, ',');) o.variants.insert(x);
    } else {
      std::fprintf(
          stderr,
          "usage: %s [--short] [--out DIR] [--duration S] [--rounds N] "
          "[--threads 1,4,16] "
          "[--janitor-rows N] [--janitor-cap S] [--topics N] [--pgbench PATH] "
          "[--scripts DIR] [--only LIST] [--skip LIST] [--batch N] "
          "[--batch-threads 1,4] "
          "[--log-seconds S] [--log-rate N] [--log-phase S] [--log-cycles N] "
          "[--log-removable N] "
          "[--log-delete-rounds N] [--log-delete-cap S] [--log-heads "
          "100000,1000000,10000000] "
          "[--variants "
          "library,library-unnamed,library-nocheck,pgbench,pgbench-extended,"
          "advisory,"
          "serializable,conditional,upsert-lock]\n",
          argv[0]);
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
