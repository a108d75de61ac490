#include "live_db.hpp"

#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <thread>

#include "citus_profile.hpp"

namespace testing {
namespace {

std::atomic<int> counter{0};

}  // namespace

std::string Unique(const std::string& prefix) {
  return prefix + std::to_string(getpid()) + "_" + std::to_string(counter++);
}

bool ThroughPooler() {
  return std::getenv("COMPACTION_POOLER_CONNINFO") != nullptr;
}

std::string ClientConninfo(const std::string& extra) {
  const char* pooler = std::getenv("COMPACTION_POOLER_CONNINFO");
  std::string conninfo = pooler != nullptr ? pooler : "";
  if (!conninfo.empty() && !extra.empty()) conninfo += ' ';
  return conninfo + extra;
}

compaction::ClientOptions ClientOptionsForTests() {
  compaction::ClientOptions options;
  options.prepared_statements = !ThroughPooler();
  return options;
}

RawConn::RawConn() : RawConn("") {}

RawConn::RawConn(const std::string& conninfo)
    : conn_(PQconnectdb(conninfo.c_str())) {
  if (PQstatus(conn_) != CONNECTION_OK) {
    FAIL(
        "cannot connect to the test database (run through "
        "deploy/local/test.sh): "
        << PQerrorMessage(conn_));
  }
}

RawConn::~RawConn() { PQfinish(conn_); }

std::vector<std::vector<std::optional<std::string>>> RawConn::Query(
    const std::string& sql,
    const std::vector<std::optional<std::string>>& params) {
  std::vector<const char*> values;
  for (const auto& p : params) values.push_back(p ? p->c_str() : nullptr);
  PGresult* r =
      PQexecParams(conn_, sql.c_str(), static_cast<int>(values.size()), nullptr,
                   values.data(), nullptr, nullptr, 0);
  const auto status = PQresultStatus(r);
  if (status != PGRES_TUPLES_OK && status != PGRES_COMMAND_OK) {
    std::string error = PQerrorMessage(conn_);
    PQclear(r);
    FAIL("query failed: " << sql << ": " << error);
  }
  std::vector<std::vector<std::optional<std::string>>> rows;
  for (int i = 0; i < PQntuples(r); ++i) {
    std::vector<std::optional<std::string>> row;
    for (int j = 0; j < PQnfields(r); ++j) {
      if (PQgetisnull(r, i, j)) {
        row.emplace_back(std::nullopt);
      } else {
        row.emplace_back(PQgetvalue(r, i, j));
      }
    }
    rows.push_back(std::move(row));
  }
  PQclear(r);
  return rows;
}

std::optional<std::string> RawConn::Value(
    const std::string& sql,
    const std::vector<std::optional<std::string>>& params) {
  auto rows = Query(sql, params);
  REQUIRE(rows.size() == 1);
  REQUIRE(rows[0].size() == 1);
  return rows[0][0];
}

std::int64_t RawConn::Int(
    const std::string& sql,
    const std::vector<std::optional<std::string>>& params) {
  auto v = Value(sql, params);
  REQUIRE(v.has_value());
  return std::stoll(*v);
}

std::string RawConn::TryExec(const std::string& sql) {
  PGresult* r = PQexec(conn_, sql.c_str());
  const auto status = PQresultStatus(r);
  std::string state;
  if (status != PGRES_TUPLES_OK && status != PGRES_COMMAND_OK) {
    const char* s = PQresultErrorField(r, PG_DIAG_SQLSTATE);
    state = s ? s : "?????";
  }
  PQclear(r);
  return state;
}

void RawConn::Send(const std::string& sql) {
  REQUIRE(PQsendQuery(conn_, sql.c_str()) == 1);
}

std::string RawConn::Finish() {
  std::string state;
  while (PGresult* r = PQgetResult(conn_)) {
    const auto status = PQresultStatus(r);
    if (status != PGRES_TUPLES_OK && status != PGRES_COMMAND_OK) {
      const char* s = PQresultErrorField(r, PG_DIAG_SQLSTATE);
      state = s ? s : "?????";
    }
    PQclear(r);
  }
  return state;
}

int RawConn::BackendPid() { return PQbackendPID(conn_); }

LiveDb::LiveDb() : schema_(Unique("t_")) {
  compaction::ClientOptions options = ClientOptionsForTests();
  options.schema = schema_;
  client_.emplace(compaction::Client::Connect(ClientConninfo(), options));
  client_->InstallSchema();
}

LiveDb::~LiveDb() {
  client_.reset();
  raw_.TryExec("DROP SCHEMA IF EXISTS \"" + schema_ + "\" CASCADE");
}

compaction::Client LiveDb::NewClient(int pool_size) const {
  compaction::ClientOptions options = ClientOptionsForTests();
  options.schema = schema_;
  options.pool_size = pool_size;
  return compaction::Client::Connect(ClientConninfo(), options);
}

std::int64_t LiveDb::TopicId(const std::string& name) {
  return raw_.Int("SELECT id FROM " + QuotedSchema() + ".topic WHERE name = $1",
                  {name});
}

std::string LiveDb::HeadTable(const std::string& topic) {
  return QuotedSchema() + ".compaction_head_" + std::to_string(TopicId(topic));
}

std::string LiveDb::MessageTable(const std::string& topic) {
  return QuotedSchema() + ".message_" + std::to_string(TopicId(topic));
}

void InsertHeadless(RawConn& raw, const std::string& table,
                    const std::string& prefix, int n, const std::string& age) {
  if (CitusProfile()) {
    // The Citus head table has the key's partition (its hash, as the
    // library writes it) as its distribution column; the shard count is
    // the topic's partitions.
    raw.Query("INSERT INTO " + table +
                  " (message_key, created_at, updated_at, idle_since, "
                  "partition) SELECT k, t, t, t, "
                  "((pg_catalog.hashtextextended(k, 0) % p.n + p.n) % p.n)"
                  "::integer FROM (SELECT $1 || g AS k FROM "
                  "generate_series(1, $2::int) g) keys, (SELECT now() - "
                  "$3::interval AS t) x, (SELECT count(*) AS n FROM "
                  "pg_catalog.pg_dist_shard WHERE logicalrelid = "
                  "$4::regclass) p",
              {prefix, std::to_string(n), age, table});
    return;
  }
  raw.Query("INSERT INTO " + table +
                " (message_key, created_at, updated_at, idle_since) "
                "SELECT $1 || g, t, t, t FROM generate_series(1, $2::int) g, "
                "(SELECT now() - $3::interval AS t) x",
            {prefix, std::to_string(n), age});
}

std::int64_t Increment(compaction::Client& client,
                       const compaction::KeyHandle<Counter>& key,
                       compaction::Producer<Counter>& producer) {
  return client.InTransaction([&](compaction::Tx& tx) {
    auto head = key.LockCompactionHead(tx);
    const std::int64_t next = (head ? head->message.value : 0) + 1;
    producer.ProduceInTx(tx, Counter{next}, Compacted(key.message_key()));
    return next;
  });
}

bool CitusProfile() {
  static std::once_flag once;
  static bool citus = false;
  std::call_once(once, [] {
    RawConn raw;
    citus = raw.Int(
                "SELECT count(*) FROM pg_catalog.pg_extension "
                "WHERE extname = 'citus'") > 0;
  });
  return citus;
}

bool SkipOnCitus(const std::string& reason) {
  if (!CitusProfile()) return false;
  std::cerr << "SKIP on Citus: "
            << Catch::getResultCapture().getCurrentTestName() << ": " << reason
            << std::endl;
  return true;
}

bool WaitForLockWait(RawConn& observer, const std::string& marker,
                     const std::string& schema,
                     std::chrono::milliseconds timeout) {
  // On Citus a routed statement waits on a worker, where the coordinator's
  // pg_stat_activity does not see it (its backend waits for the worker's
  // reply); citus_lock_waits shows such waits, under the coordinator's
  // statement text. It asks every node, so it is polled less often.
  const bool citus = CitusProfile();
  const std::string sql =
      citus ? "SELECT (SELECT count(*) FROM pg_stat_activity WHERE "
              "wait_event_type = 'Lock' AND pid <> pg_backend_pid() AND "
              "strpos(query, $1) > 0 AND strpos(query, $2) > 0) + (SELECT "
              "count(*) FROM pg_catalog.citus_lock_waits WHERE "
              "strpos(blocked_statement, $1) > 0 AND "
              "strpos(blocked_statement, $2) > 0)"
            : "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = "
              "'Lock' AND pid <> pg_backend_pid() AND strpos(query, $1) > 0 "
              "AND strpos(query, $2) > 0";
  const auto pause = std::chrono::milliseconds(citus ? 20 : 5);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (observer.Int(sql, {marker, schema}) > 0) return true;
    std::this_thread::sleep_for(pause);
  }
  return false;
}

void InstallAgain(LiveDb& db) {
  db.raw().Query("DROP SCHEMA " + db.QuotedSchema() + " CASCADE");
  db.client().InstallSchema();
}

void InstallAgainFrom(LiveDb& db, std::int64_t id) {
  InstallAgain(db);
  db.raw().Query("ALTER TABLE " + db.QuotedSchema() +
                 ".topic ALTER COLUMN id RESTART WITH " + std::to_string(id));
}

void ReuseTopicIdElsewhere(LiveDb& db, const std::string& name,
                           const std::string& other, int other_partitions) {
  const std::int64_t id = db.TopicId(name);
  InstallAgainFrom(db, id);
  compaction::TopicConfig config;
  config.partitions = other_partitions;
  db.client().Topic<Counter>(other).Register(config);
  REQUIRE(db.TopicId(other) == id);
  db.NewClient(1).Topic<Counter>(name).Register();
  REQUIRE(db.TopicId(name) != id);
}

}  // namespace testing
