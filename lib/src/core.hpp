// ClientCore: what a Client and its handles share. Owns the connection pool,
// the quoted schema name and a cache of topic ids for plain reads.
//
// Lifetime: shared by Client copies, handles and producers (shared_ptr).
// Thread safety: all members are safe to use from many threads.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "compaction/detail/entry_points.hpp"
#include "compaction/options.hpp"
#include "compaction/tx.hpp"
#include "head_hints.hpp"
#include "pg/connection.hpp"
#include "pg/errors.hpp"
#include "pg/exec.hpp"
#include "pg/pool.hpp"

namespace compaction::detail {

// The SQL text of a topic's per-call statements (the writers' and the plain
// head read's), built once per topic instead of on every call (string
// building showed in the client's CPU profile; test/bench/RESULTS.md). A
// topic's partition count never changes, but an id can name another topic
// after the schema is dropped and installed again under a live client: the
// partitions, which the plain insert's text (and on Citus the head read's)
// depends on, are checked on every look-up.
struct TopicSql {
  int partitions = 0;
  pg::FixedSql lock;               // lock.cpp, LockSql
  pg::FixedSql lock_row;           // lock.cpp, LockRowSql
  pg::FixedSql read_locked_head;   // lock.cpp, ReadLockedHeadSql
  pg::FixedSql produce_compacted;  // produce.cpp, CompactedInsertSql
  pg::FixedSql produce_keyed;      // produce.cpp, PlainInsertSql
  pg::FixedSql produce_unkeyed;
  pg::FixedSql produce_batch;  // produce_batch.cpp, ProduceBatchSql
  pg::FixedSql read_head;      // lock.cpp, ReadHeadSql
  pg::FixedSql insert_lock;    // lock.cpp, InsertLockSql

  // FixedSql slots a topic's entry takes (pg::PreparedCache).
  static constexpr std::size_t kSlots = 9;
};

// The look-up of a topic by name in `schema` (topics.cpp), for
// ClientCore to build once: ResolveTopic's, which also reads a database
// from a build before the fingerprint column, and RunWithLookup's, which
// names the column (see there).
std::string ResolveTopicSql(const std::string& schema);
std::string LookupTopicSql(const std::string& schema);

// FixedSql slots (pg::PreparedCache) of the statements every ClientCore
// has; TopicSql entries take theirs after these.
inline constexpr std::size_t kResolveSlot = 0;
inline constexpr std::size_t kLookupSlot = 1;
inline constexpr std::size_t kFirstTopicSlot = 2;

class ClientCore : public std::enable_shared_from_this<ClientCore> {
 public:
  // `options` as CheckClientOptions accepts them. Opens no connection;
  // throws InvalidArgument when the conninfo's options cannot be applied
  // per transaction (pg::Pool).
  ClientCore(pg::ConnParams params, ClientOptions options)
      : options_(std::move(options)),
        schema_(pg::QuoteIdentifier(options_.schema)),
        resolve_sql_{ResolveTopicSql(schema_), kResolveSlot},
        lookup_sql_{LookupTopicSql(schema_), kLookupSlot},
        params_(params),
        pool_(std::move(params), options_.session_settings,
              options_.application_name, options_.pool_size,
              options_.acquire_timeout, options_.prepared_statements,
              &options_.notice_handler) {}

  const ClientOptions& options() const { return options_; }
  // Whether the schema has the Citus profile (doc/citus.md): set where the
  // recorded profile is read (the schema check at Connect, InstallSchema),
  // so the few statements that differ on Citus branch on it.
  bool citus() const { return citus_.load(std::memory_order_relaxed); }
  void set_citus(bool citus) { citus_.store(citus, std::memory_order_relaxed); }
  // The quoted schema identifier, ready to splice into SQL.
  const std::string& schema() const { return schema_; }
  // The statement ResolveTopic runs, built once.
  const pg::FixedSql& resolve_sql() const { return resolve_sql_; }
  // The one RunWithLookup sends with a transaction's first statement.
  const pg::FixedSql& lookup_sql() const { return lookup_sql_; }
  pg::Pool& pool() { return pool_; }
  // What the pool's connections are opened with (before ForConnection).
  const pg::ConnParams& params() const { return params_; }

  // Generated table names come from the numeric topic id only.
  std::string MessageTable(std::int64_t topic_id) const {
    return schema_ + ".message_" + std::to_string(topic_id);
  }
  std::string HeadTable(std::int64_t topic_id) const {
    return schema_ + ".compaction_head_" + std::to_string(topic_id);
  }
  std::string HeadPkey(std::int64_t topic_id) const {
    return "compaction_head_" + std::to_string(topic_id) + "_pkey";
  }

  std::optional<TopicInfo> CachedTopic(const std::string& name);
  void CacheTopic(const TopicInfo& topic);
  void ForgetTopic(const std::string& name);

  // `topic`'s statements (topics.cpp), built on first use. The reference
  // stays valid for the life of the core.
  const TopicSql& Sql(const TopicInfo& topic);
  // Keys this client saw with a head (lock.cpp).
  HeadHints& head_hints() { return head_hints_; }
  // Whether a topic's unhinted keys tend to be new (lock.cpp).
  NewKeyOdds& new_key_odds() { return new_key_odds_; }

 private:
  const ClientOptions options_;
  const std::string schema_;
  const pg::FixedSql resolve_sql_;
  const pg::FixedSql lookup_sql_;
  const pg::ConnParams params_;
  pg::Pool pool_;
  std::mutex cache_mutex_;
  std::unordered_map<std::string, TopicInfo> topics_;
  std::atomic<bool> citus_{false};
  std::mutex sql_mutex_;
  // By topic id and Citus profile (the plain insert differs on Citus). The
  // client's topics are few: entries are never dropped.
  std::unordered_map<std::int64_t, std::unique_ptr<const TopicSql>> sql_[2];
  // Entries replaced after a schema was installed again: a caller may still
  // hold a reference to one.
  std::vector<std::unique_ptr<const TopicSql>> retired_sql_;
  HeadHints head_hints_;
  NewKeyOdds new_key_odds_;
};

// A message a transaction wrote, as its INSERT ... RETURNING said: the
// effect looked for. Its id alone proves nothing (identity values can be
// drawn again after a crash or a failover), so key and created_at must
// match too.
struct WrittenMessage {
  std::int64_t topic_id = 0;
  std::int64_t id = 0;
  std::optional<std::string> key;
  std::int64_t created_at_us = 0;
};

// The state behind a Tx. An owned Tx keeps its client's core (and so the
// pool its lease returns to) alive, even when the Client object is gone.
class TxState {
 public:
  TxState(std::shared_ptr<ClientCore> core, pg::Pool::Lease lease)
      : core_(std::move(core)),
        session_((*lease).session()),
        lease_(std::move(lease)),
        borrowed_(false) {
    session_.begins_transaction = true;
  }
  explicit TxState(pg_conn* borrowed)
      : session_{borrowed, nullptr}, borrowed_(true) {}

  pg::Session session() const { return session_; }
  // The session for one library operation in this transaction; refused
  // before anything is sent when the transaction is finished (UsageError)
  // or a borrowed connection was put into pipeline mode (InvalidArgument:
  // the library's synchronous statements cannot run there).
  pg::Session SessionFor(const char* operation) const;
  // SessionFor for an operation that writes or locks: also refuses, with
  // InvalidArgument naming the level, a borrowed transaction that is not
  // READ COMMITTED (the lock loop is defined for READ COMMITTED only).
  // Asks the server once per borrowed transaction; an owned one began
  // READ COMMITTED.
  pg::Session WritingSessionFor(const char* operation);

  // Topics this transaction resolved and then touched (locked a head row
  // of, or produced to): a Destroy waits for this transaction on those
  // tables' locks, so the id stays valid to its end.
  std::optional<TopicInfo> TouchedTopic(const std::string& name) const;
  void RememberTouchedTopic(const TopicInfo& topic);
  // The client's core; null for a borrowed transaction.
  ClientCore* core() const { return core_.get(); }
  // The last message this transaction produced (ProduceInTx): what a
  // COMMIT whose connection broke is looked for by.
  const std::optional<WrittenMessage>& written() const { return written_; }
  void RememberWritten(WrittenMessage message) {
    written_ = std::move(message);
  }
  // Keys this transaction locked through LockCompactionHead: a keyed
  // produce without compaction to one of them would leave its head behind
  // (locked_keys.cpp).
  void RememberLockedKey(std::int64_t topic_id, const std::string& key);
  bool HoldsLockedKey(std::int64_t topic_id, const std::string& key) const;
  bool borrowed() const { return borrowed_; }
  // The caller has had the connection (Tx::native_handle) and may have sent
  // statements the library never saw, a ROLLBACK TO SAVEPOINT among them.
  void MarkNativeUsed() { native_used_ = true; }
  bool native_used() const { return native_used_; }
  TxStatus status() const { return status_; }
  bool finished() const { return status_ != TxStatus::kActive; }
  // Returns the connection to the pool (or closes it when it is broken).
  void Finish(TxStatus status) {
    status_ = status;
    lease_.reset();
  }
  // UsageError for an operation on a finished transaction, naming how it
  // finished.
  [[noreturn]] void ThrowFinished(const char* operation) const;

 private:
  std::shared_ptr<ClientCore> core_;  // declared first: outlives lease_
  pg::Session session_;
  std::optional<pg::Pool::Lease> lease_;  // reset once finished
  const bool borrowed_;
  TxStatus status_ = TxStatus::kActive;
  bool read_committed_checked_ = false;
  bool native_used_ = false;
  std::vector<TopicInfo> touched_topics_;  // a handful at most
  std::optional<WrittenMessage> written_;
  std::vector<std::pair<std::int64_t, std::string>> locked_keys_;
};

// The callgate of Tx: the one way library code reaches a Tx's state or
// makes a Tx, both private to users.
class TxGate {
 public:
  // Throws UsageError on a moved-from Tx.
  static TxState& State(const Tx& tx) { return tx.state(); }
  static Tx Make(std::unique_ptr<TxState> state) {
    return Tx(std::move(state));
  }
};

// Runs `fn(session)` on a pooled connection outside any transaction.
template <class F>
decltype(auto) WithConnection(ClientCore& core, const char* operation, F&& fn) {
  pg::Pool::Lease lease = core.pool().Acquire(operation);
  return std::forward<F>(fn)((*lease).session());
}

}  // namespace compaction::detail
