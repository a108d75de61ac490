// Compaction-head reads: the lock loop (doc/architecture.md), plain reads,
// listing and key history.
#include <chrono>
#include <optional>
#include <string>

#include "compaction/tx.hpp"
#include "core.hpp"
#include "rows.hpp"
#include "topics.hpp"
#include "validate.hpp"

namespace compaction::detail {
namespace {

// A lost insert race means another transaction created the key row between
// our SELECT and INSERT; each round after that normally ends in the next
// SELECT. Only rows deleted over and over (a janitor with a tiny TTL racing
// us) can exhaust this, and then a clear error beats spinning.
constexpr int kMaxLockRounds = 16;

const std::string kSavepoint = "compaction_lock_head";

std::string LockSql(const ClientCore& core, std::int64_t id) {
  // The marker comment lets tests find this statement in pg_stat_activity.
  return "/* compaction:LockCompactionHead */ SELECT h.head_id FROM " +
         core.HeadTable(id) + " h WHERE h.message_key = $1 FOR UPDATE OF h";
}

// Sent in the same round trip as the lock, it runs once the lock is held.
// A join inside the lock statement would not do: after waiting for the
// lock, READ COMMITTED re-checks the locked head row but keeps the message
// row of the statement's old snapshot, so a head that moved meanwhile would
// need another round trip, taken while holding the lock every waiter wants.
std::string LockedHeadSql(const ClientCore& core, std::int64_t id) {
  return "/* compaction:LockCompactionHead:read */ SELECT " +
         std::string(kMessageColumns) + " FROM " + core.HeadTable(id) +
         " h JOIN " + core.MessageTable(id) +
         " m ON m.id = h.head_id WHERE h.message_key = $1";
}

// The times are the column defaults (the statement's): the application
// role may insert message_key only.
std::string InsertHeadlessSql(const ClientCore& core, std::int64_t id) {
  return "/* compaction:LockCompactionHead:insert */ INSERT INTO " +
         core.HeadTable(id) +
         " (message_key) VALUES ($1) "
         "ON CONFLICT ON CONSTRAINT " +
         core.HeadPkey(id) + " DO NOTHING RETURNING message_key";
}

std::string RefreshHeadlessSql(const ClientCore& core, std::int64_t id) {
  return "UPDATE " + core.HeadTable(id) +
         " SET updated_at = pg_catalog.statement_timestamp(), idle_since = "
         "pg_catalog.statement_timestamp() WHERE message_key = $1 AND head_id "
         "IS NULL";
}

// One pass of the loop. Returns true and fills `head` when the key row is
// locked (head empty for a headless row); false after a lost insert race.
bool TryLockRound(ClientCore& core, pg::Session s, std::int64_t topic_id,
                  const std::string& key, std::optional<RawStored>& head) {
  constexpr const char* kOp = "LockCompactionHead";
  std::vector<pg::Result> r = pg::ExecPipelined(
      s, kOp,
      {{LockSql(core, topic_id), pg::Params().Add(key)},
       {LockedHeadSql(core, topic_id), pg::Params().Add(key)}});
  const pg::Result& locked = r[0];
  const pg::Result& message = r[1];
  if (locked.rows() == 1) {
    if (pg::IsNull(locked, 0, 0)) {
      // Locked again: restart the headless row's TTL under our lock.
      pg::Exec(s, kOp, RefreshHeadlessSql(core, topic_id),
               pg::Params().Add(key));
      head.reset();
      return true;
    }
    // The row lock keeps the head where the lock found it.
    if (message.rows() != 1 ||
        pg::OptInt64(message, 0, 0) != pg::OptInt64(locked, 0, 0)) {
      // Cannot happen: a head and its message commit together, and our
      // row lock pins head_id between the two statements.
      throw InternalError(kOp,
                          "internal invariant broken: the locked head's "
                          "message was not read back");
    }
    head = ParseStored(kOp, message, 0, 0);
    // A tombstone head: the key has no value, though its row is locked.
    if (head->message.tombstone) head.reset();
    return true;
  }
  pg::Result inserted = pg::Exec(s, kOp, InsertHeadlessSql(core, topic_id),
                                 pg::Params().Add(key));
  head.reset();
  return inserted.rows() == 1;  // our new row is locked by us
}

std::optional<RawStored> LockLoop(ClientCore& core, pg::Session s,
                                  std::int64_t topic_id,
                                  const std::string& key) {
  std::optional<RawStored> head;
  for (int round = 0; round < kMaxLockRounds; ++round) {
    if (TryLockRound(core, s, topic_id, key, head)) return head;
  }
  // Like a serialization failure: the same transaction may succeed again.
  throw RetryableError(
      "LockCompactionHead", std::string(pg::kSerializationFailure),
      "the key row vanished after " + std::to_string(kMaxLockRounds) +
          " lost insert races; retry the transaction");
}

// Opens the savepoint; with `timeout`, also sets lock_timeout for the body
// and returns the caller's value so that LeaveSql can restore it.
std::string EnterSavepoint(pg::Session s,
                           std::optional<std::chrono::milliseconds> timeout) {
  constexpr const char* kOp = "LockCompactionHead";
  if (!timeout) {
    pg::ExecScript(s.conn, kOp, "SAVEPOINT " + kSavepoint);
    return "";
  }
  pg::Result old =
      pg::ExecScript(s.conn, kOp,
                     "SAVEPOINT " + kSavepoint +
                         "; SELECT pg_catalog.current_setting('lock_timeout'), "
                         "pg_catalog.set_config('lock_timeout', '" +
                         std::to_string(timeout->count()) + "ms', true)");
  return std::string(pg::Text(old, 0, 0));
}

// Releases the savepoint, first restoring the lock_timeout EnterSavepoint
// replaced (when it replaced one).
std::string LeaveSql(pg::Session s, bool timeout_set,
                     const std::string& previous) {
  const std::string release = "RELEASE SAVEPOINT " + kSavepoint;
  if (!timeout_set) return release;
  return "SELECT pg_catalog.set_config('lock_timeout', " +
         pg::QuoteLiteral(s.conn, previous, "LockCompactionHead") +
         ", true); " + release;
}

// Runs `body` inside a savepoint, so that a lock timeout (the caller's own
// or `timeout`) or any statement error leaves the caller's transaction
// usable. With `timeout`, lock_timeout is set for the body only: the
// caller's value is restored afterwards.
template <class F>
auto InSavepoint(pg::Session s,
                 std::optional<std::chrono::milliseconds> timeout, F&& body) {
  constexpr const char* kOp = "LockCompactionHead";
  const std::string previous = EnterSavepoint(s, timeout);
  try {
    auto result = body();
    pg::ExecScript(s.conn, kOp, LeaveSql(s, timeout.has_value(), previous));
    return result;
  } catch (...) {
    // Undoes the failed statement and any lock_timeout setting alike. When
    // even that fails (connection gone) the original error is the news.
    try {
      pg::ExecScript(s.conn, kOp,
                     "ROLLBACK TO SAVEPOINT " + kSavepoint +
                         "; RELEASE SAVEPOINT " + kSavepoint);
    } catch (const Error&) {
    }
    throw;
  }
}

}  // namespace

std::optional<RawStored> LockHead(ClientCore& core, Tx& tx,
                                  const std::string& topic,
                                  const std::string& key,
                                  const LockOptions& options) {
  constexpr const char* kOp = "LockCompactionHead";
  ValidateTopicName(kOp, topic);
  ValidateMessageKey(kOp, key);
  if (options.lock_timeout) {
    ValidateServerTimeout(kOp, "lock_timeout", *options.lock_timeout);
  }
  TxState& state = TxGate::State(tx);
  const pg::Session s = state.WritingSessionFor(kOp);
  // Resolved through the caller's transaction, never the client's cache,
  // so the whole operation sees one database transaction. The same round
  // trip reads the session's lock_timeout: when the caller set one, the
  // lock runs in a savepoint, so its expiry is a LockTimeout that leaves the
  // transaction usable, as with LockOptions. Without one (the default) a
  // lock waits until it is granted and needs no savepoint, which would
  // cost a subtransaction per lock.
  std::string session_lock_timeout;
  const TopicInfo info =
      ResolveTopic(core, s, kOp, topic, &session_lock_timeout);
  auto lock = [&] { return LockLoop(core, s, info.id, key); };
  std::optional<RawStored> head;
  if (options.lock_timeout || session_lock_timeout != "0") {
    head = InSavepoint(s, options.lock_timeout, lock);
  } else {
    head = lock();
  }
  state.RememberTouchedTopic(info);
  return head;
}

std::optional<RawStored> ReadHead(ClientCore& core, const std::string& topic,
                                  const std::string& key) {
  constexpr const char* kOp = "CompactionHead";
  ValidateTopicName(kOp, topic);
  ValidateMessageKey(kOp, key);
  return WithTopic(
      core, kOp, topic,
      [&](pg::Session s, const TopicInfo& t) -> std::optional<RawStored> {
        pg::Result r = pg::Exec(
            s, kOp,
            "SELECT " + std::string(kMessageColumns) + " FROM " +
                core.HeadTable(t.id) + " h JOIN " + core.MessageTable(t.id) +
                " m ON m.id = h.head_id WHERE h.message_key = $1 "
                "AND m.payload IS NOT NULL",
            pg::Params().Add(key));
        if (r.rows() == 0) return std::nullopt;
        return ParseStored(kOp, r, 0, 0);
      });
}

std::vector<RawStored> ListHeads(ClientCore& core, const std::string& topic,
                                 const ListOptions& options) {
  constexpr const char* kOp = "ListCompactionHeads";
  ValidateTopicName(kOp, topic);
  ValidateLimit(kOp, "limit", options.limit, kMaxPageSize);
  if (!options.after_key.empty()) ValidateMessageKey(kOp, options.after_key);
  return WithTopic(core, kOp, topic, [&](pg::Session s, const TopicInfo& t) {
    pg::Result r = pg::Exec(
        s, kOp,
        "SELECT " + std::string(kMessageColumns) + " FROM " +
            core.HeadTable(t.id) + " h JOIN " + core.MessageTable(t.id) +
            " m ON m.id = h.head_id WHERE h.message_key > $1 "
            "AND m.payload IS NOT NULL ORDER BY h.message_key LIMIT $2",
        pg::Params().Add(options.after_key).Add(options.limit));
    return ParseAllStored(kOp, r);
  });
}

std::vector<RawStored> KeyMessages(ClientCore& core, const std::string& topic,
                                   const std::string& key, int limit,
                                   bool with_tombstones) {
  constexpr const char* kOp = "Messages";
  ValidateTopicName(kOp, topic);
  ValidateMessageKey(kOp, key);
  ValidateLimit(kOp, "limit", limit, kMaxPageSize);
  return WithTopic(core, kOp, topic, [&](pg::Session s, const TopicInfo& t) {
    pg::Result r =
        pg::Exec(s, kOp,
                 "SELECT " + std::string(kMessageColumns) + " FROM " +
                     core.MessageTable(t.id) + " m WHERE m.message_key = $1 " +
                     (with_tombstones ? "" : "AND m.payload IS NOT NULL ") +
                     "ORDER BY m.id DESC LIMIT $2",
                 pg::Params().Add(key).Add(limit));
    return ParseAllStored(kOp, r);
  });
}

}  // namespace compaction::detail
