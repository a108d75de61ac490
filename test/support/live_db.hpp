// Fixtures for tests against the throwaway PostgreSQL started by
// deploy/local/pg.sh (PG* variables exported by deploy/local/test.sh).
//
// LiveDb gives each test its own schema and drops it afterwards, so tests
// can run in parallel on one cluster. RawConn is a plain libpq connection
// for what a test does behind the library's back: holding locks, reading
// catalogs, watching pg_stat_activity.
#pragma once

#include <libpq-fe.h>

#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "compaction/compaction.hpp"

namespace testing {

// A message type used across the tests.
struct Counter {
  static constexpr int kSchemaVersion = 1;
  std::int64_t value = 0;
  bool operator==(const Counter&) const = default;
};
inline void to_json(nlohmann::json& j, const Counter& c) {
  j = nlohmann::json{{"value", c.value}};
}
inline void from_json(const nlohmann::json& j, Counter& c) {
  j.at("value").get_to(c.value);
}

// The conninfo (with `extra` keywords appended) and options of the
// library's clients in live tests: the cluster of the PG* variables, or,
// under test/pooler/with_pooler.sh (COMPACTION_POOLER_CONNINFO set), the
// PgBouncer in transaction mode in front of it with prepared_statements =
// false. RawConn always talks to the cluster itself.
std::string ClientConninfo(const std::string& extra = "");
compaction::ClientOptions ClientOptionsForTests();
bool ThroughPooler();

class RawConn {
 public:
  RawConn();  // the test cluster's database from the PG* variables
  // Fails the test when `conninfo` (over the PG* variables) cannot connect.
  explicit RawConn(const std::string& conninfo);
  ~RawConn();
  RawConn(const RawConn&) = delete;
  RawConn& operator=(const RawConn&) = delete;

  // Runs `sql` (parameters as text, nullopt = NULL); fails the test on error.
  std::vector<std::vector<std::optional<std::string>>> Query(
      const std::string& sql,
      const std::vector<std::optional<std::string>>& params = {});
  // The single value of a one-row, one-column query.
  std::optional<std::string> Value(
      const std::string& sql,
      const std::vector<std::optional<std::string>>& params = {});
  std::int64_t Int(const std::string& sql,
                   const std::vector<std::optional<std::string>>& params = {});
  // Like Query but returns the SQLSTATE of a failure ("" on success).
  std::string TryExec(const std::string& sql);
  // Sends `sql` without waiting for its result (it may block on a lock);
  // Finish() collects the result later.
  void Send(const std::string& sql);
  std::string Finish();  // SQLSTATE or ""
  int BackendPid();
  PGconn* get() { return conn_; }

 private:
  PGconn* conn_;
};

class LiveDb {
 public:
  // Creates schema `t_<pid>_<n>` and installs the baseline in it.
  LiveDb();
  ~LiveDb();

  compaction::Client& client() { return *client_; }
  const std::string& schema() const { return schema_; }
  // Another client on the same schema (its own pool).
  compaction::Client NewClient(int pool_size = 4) const;
  std::string QuotedSchema() const { return "\"" + schema_ + "\""; }
  std::int64_t TopicId(const std::string& name);
  std::string HeadTable(const std::string& topic);
  std::string MessageTable(const std::string& topic);

  RawConn& raw() { return raw_; }

 private:
  std::string schema_;
  RawConn raw_;
  std::optional<compaction::Client> client_;
};

// Waits until a backend running a query that contains both `marker` and
// `schema` (so parallel tests do not see each other) waits on a heavyweight
// lock (pg_stat_activity.wait_event_type = 'Lock'). False after `timeout`.
bool WaitForLockWait(
    RawConn& observer, const std::string& marker, const std::string& schema,
    std::chrono::milliseconds timeout = std::chrono::seconds(10));

// A TopicConfig that sets only the headless TTL.
inline compaction::TopicConfig Ttl(std::chrono::milliseconds ttl) {
  compaction::TopicConfig config;
  config.headless_ttl = ttl;
  return config;
}

// Options of a compacted produce of `key`.
inline compaction::ProduceOptions Compacted(const std::string& key,
                                            std::int64_t rank = 0) {
  return compaction::ProduceOptions{key, compaction::CompactionOptions{rank}};
}

// One read-modify-write increment: lock the key's head and produce head + 1
// in the same transaction. Returns the new value.
std::int64_t Increment(compaction::Client& client,
                       const compaction::KeyHandle<Counter>& key,
                       compaction::Producer<Counter>& producer);

// Inserts headless rows `<prefix>1..n` into `table`, last touched `age`
// ago, shaped like the rows LockCompactionHead inserts (idle_since =
// updated_at).
void InsertHeadless(RawConn& raw, const std::string& table,
                    const std::string& prefix, int n,
                    const std::string& age = "2 hours");

// A fresh unique string for keys and topic names.
std::string Unique(const std::string& prefix);

// Drops `db`'s schema and installs it again under the live clients.
void InstallAgain(LiveDb& db);

// InstallAgain, then makes the next topic id `id`. An install starts its
// ids above every id an earlier one handed out; a clock stepped back, or
// an old dump restored, could still hand one out again.
void InstallAgainFrom(LiveDb& db, std::int64_t id);

// InstallAgainFrom with the id of `name`, whose old id the live clients'
// caches still hold: topic `other` (of `other_partitions`) registered
// first takes that id, and `name` is registered again (through another
// client) under a new one. Requires both.
void ReuseTopicIdElsewhere(LiveDb& db, const std::string& name,
                           const std::string& other, int other_partitions = 1);

}  // namespace testing
