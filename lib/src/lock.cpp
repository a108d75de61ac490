// LockCompactionHead's lock loop (doc/architecture.md; test/pg/lock_test.cpp),
// and the plain head reads beside it: ReadHead, ListHeads and the key
// history (test/pg/semantics_test.cpp, topics_test.cpp).
#include "lock.hpp"

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "compaction/tx.hpp"
#include "core.hpp"
#include "pg/sqlstate.hpp"
#include "rows.hpp"
#include "topics.hpp"
#include "validate.hpp"

namespace compaction::detail {
namespace {

const std::string kSavepoint = "compaction_lock_head";

// On Citus (doc/citus.md) head and message rows join on the distribution
// column too, or Citus refuses the join (it would have to repartition); a
// single-node head table has no partition column.
std::string HeadJoin(const ClientCore& core) {
  return core.citus() ? " m ON m.id = h.head_id AND m.partition = h.partition"
                      : " m ON m.id = h.head_id";
}

// On Citus, the partition of key $1 (the hash sql/citus_topic_v1.sql
// checks) on table `alias`, so that a one-key read is routed to that key's
// shard alone.
std::string KeyShard(const ClientCore& core, const TopicInfo& t,
                     const char* alias = "h") {
  if (!core.citus()) return "";
  const std::string n = std::to_string(t.partitions) + "::bigint";
  return std::string(" AND ") + alias +
         ".partition = ((pg_catalog.hashtextextended($1::text, "
         "0::bigint) % " +
         n + " + " + n + ") % " + n + ")::integer";
}

struct Locked {
  // false: the session has a lock_timeout, so nothing was done; the lock
  // must be taken again inside a savepoint.
  bool done = true;
  std::optional<RawStored> head;  // empty: headless
};

// The call of `topic`'s lock function. `guarded`: the caller runs it
// inside a savepoint, which a lock timeout may roll back to.
pg::Statement LockStatement(ClientCore& core, const TopicInfo& topic,
                            const std::string& key, bool guarded) {
  return {core.Sql(topic).lock,
          pg::Params().Add(key).Add(std::string(guarded ? "t" : "f"))};
}

// What the lock function returned.
Locked ParseLocked(const pg::Result& row) {
  constexpr const char* kOp = "LockCompactionHead";
  if (row.rows() != 1) {
    throw InternalError(kOp, "the lock function returned no row");
  }
  Locked out;
  switch (pg::Text(row, 0, 0).front()) {
    case 'g':
      out.done = false;
      return out;
    case 'e':
      return out;
    case 'h':
      if (pg::IsNull(row, 0, 1)) {
        // Cannot happen: a head and its message commit together, and the
        // row lock pins head_id while the message is read.
        throw InternalError(kOp,
                            "internal invariant broken: the locked head's "
                            "message was not read back");
      }
      out.head = ParseStored(kOp, row, 0, 1);
      return out;
    case 'v':
      // A lost insert race means another transaction created the key row
      // between the function's SELECT and INSERT; the next SELECT normally
      // locks it. Only rows deleted over and over (a janitor with a tiny
      // TTL racing us) exhaust the rounds, and then a clear error beats
      // spinning. The function returned normally: the transaction is fine.
      throw RetryableError(kOp, std::string(pg::kSerializationFailure),
                           "the key row vanished after 16 lost insert races; "
                           "retry the transaction");
    default:
      throw InternalError(kOp, "the lock function returned an unknown status");
  }
}

Locked LockOnce(ClientCore& core, pg::Session s, const TopicInfo& topic,
                const std::string& key, bool guarded) {
  return ParseLocked(pg::ExecStatement(
      s, "LockCompactionHead", LockStatement(core, topic, key, guarded)));
}

// How the first attempt locks a key.
enum class Way {
  // lock_<id>, which decides in every state of the key.
  kFunction,
  // A key this client saw with a head, which most likely still has one:
  // LockRowSql, then ReadLockedHeadSql, which spare the plpgsql call.
  kSeed,
  // A key not seen with a head, of a topic whose such keys have mostly been
  // headless (NewKeyOdds): InsertLockSql alone, which spares a new key the
  // function's SELECT that finds nothing.
  kInsert,
};

// Not on Citus, whose head rows are routed by partition: lock_<id> there.
Way ChooseWay(ClientCore& core, const TopicInfo& topic,
              const std::string& key) {
  if (core.citus()) return Way::kFunction;
  if (core.head_hints().Has(topic.id, key)) return Way::kSeed;
  if (core.new_key_odds().Likely(topic.id)) return Way::kInsert;
  return Way::kFunction;
}

std::vector<pg::Statement> AttemptStatements(ClientCore& core,
                                             const TopicInfo& topic,
                                             const std::string& key, Way way) {
  std::vector<pg::Statement> out;
  const TopicSql& sql = core.Sql(topic);
  switch (way) {
    case Way::kFunction:
      out.push_back(LockStatement(core, topic, key, false));
      break;
    case Way::kSeed:
      out.emplace_back(sql.lock_row, pg::Params().Add(key));
      out.emplace_back(sql.read_locked_head, pg::Params().Add(key));
      break;
    case Way::kInsert:
      out.emplace_back(sql.insert_lock, pg::Params().Add(key));
      break;
  }
  return out;
}

std::vector<pg::Result> RunAttempt(pg::Session s,
                                   const std::vector<pg::Statement>& attempt) {
  constexpr const char* kOp = "LockCompactionHead";
  if (attempt.size() > 1) return pg::ExecPipelined(s, kOp, attempt);
  std::vector<pg::Result> out;
  out.push_back(pg::ExecStatement(s, kOp, attempt.front()));
  return out;
}

// What the first attempt locked; empty when lock_<id> must decide.
// `session_timeout`: the look-up sent with the attempt read a session
// lock_timeout (not 0), under which the seed's and the insert's statements
// did nothing, so the guarded retry in a savepoint runs at once.
// - The seed's way: the head, or not done when the row has a head but
//   nothing was locked (a session lock_timeout the look-up did not read;
//   or the row was deleted and made again while the lock waited), so the
//   guarded retry runs at once, as after lock_<id>'s 'g'. Empty when the
//   row is gone (janitor, cleaner) or headless (its TTL must restart under
//   the lock).
// - The insert: a row back is a headless row locked (inserted, or
//   refreshed as lock_<id> does). None is a row with a head, locked but
//   not read, which lock_<id> reads (its lock is ours already), or nothing
//   done under a session lock_timeout, which lock_<id> answers with 'g'.
std::optional<Locked> JudgeAttempt(Way way,
                                   const std::vector<pg::Result>& results,
                                   bool session_timeout) {
  if (way == Way::kFunction) return ParseLocked(results.front());
  if (session_timeout) return Locked{false, std::nullopt};
  if (way == Way::kInsert) {
    if (results.front().rows() == 1) return Locked{};
    return std::nullopt;
  }
  const bool locked = results[0].rows() == 1;
  const bool has_head = results[1].rows() == 1;
  if (locked && has_head) return ParseLocked(results[1]);
  if (has_head) return Locked{false, std::nullopt};
  return std::nullopt;
}

// Opens the savepoint; with `timeout`, also sets lock_timeout for the body
// and returns the caller's value so that LeaveSql can restore it.
std::string EnterSavepoint(pg::Session s,
                           std::optional<std::chrono::milliseconds> timeout) {
  constexpr const char* kOp = "LockCompactionHead";
  if (!timeout) {
    pg::ExecScript(s, kOp, "SAVEPOINT " + kSavepoint);
    return "";
  }
  pg::Result old =
      pg::ExecScript(s, kOp,
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
    pg::ExecScript(s, kOp, LeaveSql(s, timeout.has_value(), previous));
    return result;
  } catch (...) {
    // Undoes the failed statement and any lock_timeout setting alike. When
    // even that fails (connection gone) the original error is the news.
    try {
      pg::ExecScript(s, kOp,
                     "ROLLBACK TO SAVEPOINT " + kSavepoint +
                         "; RELEASE SAVEPOINT " + kSavepoint);
    } catch (const Error&) {
    }
    throw;
  }
}

}  // namespace

// The lock loop runs in the topic's lock_<id> function (sql/topic_v1.sql):
// one statement, so one round trip, whether the key is new, headless or has
// a head, and no row version written when it has one.
std::string LockSql(const ClientCore& core, std::int64_t id) {
  // The marker comment lets tests find this statement in pg_stat_activity.
  return "/* compaction:LockCompactionHead */ SELECT m.status, " +
         std::string(kMessageColumns) + " FROM " + core.schema() + ".lock_" +
         std::to_string(id) + "($1::text, $2::boolean) m";
}

// The seed's lock of an existing row, for a key the client saw with a head:
// a plain SELECT .. FOR UPDATE needs no plpgsql call, about 20 us less
// backend CPU than lock_<id> and a shorter hold of a hot key's lock
// (test/bench/RESULTS.md). Guarded like the function: under a session
// lock_timeout the setting's test, which names no column, is a one-time
// filter that fails before any row is locked, so no row lock's wait can
// time out and abort the caller's transaction here. The table's own lock
// is still taken first (lock_<id>'s guard takes none): a session
// lock_timeout can expire behind DDL or VACUUM FULL on the head table, as
// it can for a produce.
std::string LockRowSql(const ClientCore& core, std::int64_t id) {
  return "/* compaction:LockCompactionHead */ SELECT h.head_id FROM " +
         core.HeadTable(id) +
         " h WHERE h.message_key = $1 AND "
         "pg_catalog.current_setting('lock_timeout') = '0' FOR UPDATE OF h";
}

// The insert way's lock of a key the client expects to be new
// (NewKeyOdds): ON CONFLICT DO UPDATE inserts a new key's headless row,
// refreshes a headless one as lock_<id> does, and locks a row with a head
// without writing it (the update's WHERE is false there, but the
// conflicting row is locked all the same); the executor itself waits out
// and retries a concurrent insert or delete of the key, without
// lock_<id>'s bound of 16 rounds (each retry waits for another
// transaction's insert or delete of the key first). It locks FOR NO KEY UPDATE
// where lock_<id> locks FOR UPDATE: every other lock the library takes on a
// head row conflicts with both; only a FOR KEY SHARE (a foreign key of the
// user's referencing the head table) is not kept out. One statement where
// lock_<id> runs a SELECT and an INSERT (test/bench/RESULTS.md). Guarded like
// LockRowSql, row locks and the table's own lock alike.
std::string InsertLockSql(const ClientCore& core, std::int64_t id) {
  return "/* compaction:LockCompactionHead */ INSERT INTO " +
         core.HeadTable(id) +
         " AS h (message_key) SELECT $1::text WHERE "
         "pg_catalog.current_setting('lock_timeout') = '0' ON CONFLICT ON "
         "CONSTRAINT " +
         core.HeadPkey(id) +
         " DO UPDATE SET updated_at = pg_catalog.statement_timestamp(), "
         "idle_since = pg_catalog.statement_timestamp() WHERE h.head_id IS "
         "NULL RETURNING h.head_id";
}

// The head LockRowSql locked, shaped as lock_<id>'s answer. A statement of
// its own, sent with the lock: its snapshot comes after the lock, so it
// sees a head moved by the writer the lock waited for.
std::string ReadLockedHeadSql(const ClientCore& core, std::int64_t id) {
  return "/* compaction:LockCompactionHead */ SELECT 'h'::\"char\", " +
         std::string(kMessageColumns) + " FROM " + core.HeadTable(id) +
         " h JOIN " + core.MessageTable(id) +
         " m ON m.id = h.head_id WHERE h.message_key = $1";
}

// The plain read of key $1's head (CompactionHead): a tombstone head reads
// as no value. On Citus it names the key's partition, so it is routed to
// that shard alone.
std::string ReadHeadSql(const ClientCore& core, const TopicInfo& topic) {
  return "SELECT " + std::string(kMessageColumns) + " FROM " +
         core.HeadTable(topic.id) + " h JOIN " + core.MessageTable(topic.id) +
         HeadJoin(core) + " WHERE h.message_key = $1" + KeyShard(core, topic) +
         " AND m.payload IS NOT NULL";
}

LockedRow LockHeadRow(ClientCore& core, Tx& tx, const std::string& topic,
                      const std::string& key, const LockOptions& options) {
  constexpr const char* kOp = "LockCompactionHead";
  ValidateTopicName(kOp, topic);
  ValidateMessageKey(kOp, key);
  if (options.lock_timeout) {
    ValidateServerTimeout(kOp, "lock_timeout", *options.lock_timeout);
  }
  TxState& state = TxGate::State(tx);
  const pg::Session s = state.WritingSessionFor(kOp);
  // Resolved through the caller's transaction, never the client's cache,
  // so the whole operation sees one database transaction; once this
  // transaction touched the topic's tables, a Destroy waits for it, so the
  // id it resolved then holds.
  std::optional<TopicInfo> info = state.TouchedTopic(topic);
  std::optional<Locked> first;
  std::optional<Way> way;  // set once the first attempt ran
  // A look-up of this call read a session lock_timeout that is not 0.
  bool session_timeout = false;
  if (!info && !options.lock_timeout) {
    // A transaction's first statement: BEGIN, the look-up and the lock in
    // one round trip.
    std::optional<LookedUp> done =
        RunWithLookup(core, s, kOp, topic, [&](const TopicInfo& t) {
          way = ChooseWay(core, t, key);
          return AttemptStatements(core, t, key, *way);
        });
    if (done) {
      info = std::move(done->topic);
      session_timeout = done->lock_timeout != "0";
      first = JudgeAttempt(*way, done->results, session_timeout);
    } else {
      way.reset();
    }
  }
  if (!info) {
    std::string lock_timeout;
    info = ResolveTopic(core, s, kOp, topic, &lock_timeout);
    session_timeout = lock_timeout != "0";
  }
  auto guarded = [&] { return LockOnce(core, s, *info, key, true).head; };
  std::optional<RawStored> head;
  try {
    if (options.lock_timeout) {
      head = InSavepoint(s, options.lock_timeout, guarded);
    } else {
      // Without a lock_timeout (the default) a lock waits until it is
      // granted and needs no savepoint, which would cost a subtransaction
      // per lock. With one the caller set, the function does nothing and
      // says so; its expiry inside a savepoint is then a LockTimeout that
      // leaves the transaction usable, as with LockOptions.
      if (session_timeout && !way) {
        // The look-up just said the session has one: straight to the
        // savepoint, without an attempt that would do nothing.
        first = Locked{false, std::nullopt};
      } else if (!way) {
        way = ChooseWay(core, *info, key);
        first = JudgeAttempt(
            *way, RunAttempt(s, AttemptStatements(core, *info, key, *way)),
            session_timeout);
      }
      if (!first) first = LockOnce(core, s, *info, key, false);
      head = first->done ? std::move(first->head)
                         : InSavepoint(s, std::nullopt, guarded);
    }
  } catch (const DatabaseError& e) {
    // Destroyed between the lookup and the lock (the statement failed, so
    // the transaction is aborted now).
    if (e.sqlstate() == pg::kUndefinedTable ||
        e.sqlstate() == pg::kUndefinedFunction) {
      throw TopicNotFound(kOp, topic);
    }
    throw;
  }
  if (!core.citus()) {
    core.head_hints().Set(info->id, key, head.has_value());
    // What an unhinted key turned out to be decides the next one's way.
    if (way && *way != Way::kSeed)
      core.new_key_odds().Record(info->id, !head.has_value());
  }
  state.RememberTouchedTopic(*info);
  state.RememberLockedKey(info->id, key);
  return LockedRow{std::move(head)};
}

std::optional<RawStored> LockHead(ClientCore& core, Tx& tx,
                                  const std::string& topic,
                                  const std::string& key,
                                  const LockOptions& options) {
  std::optional<RawStored> head =
      LockHeadRow(core, tx, topic, key, options).head;
  // A tombstone head: the key has no value, though its row is locked.
  if (head && head->message.tombstone) head.reset();
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
        pg::Result r =
            pg::Exec(s, kOp, core.Sql(t).read_head, pg::Params().Add(key));
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
            HeadJoin(core) +
            " WHERE h.message_key > $1 "
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
                     core.MessageTable(t.id) + " m WHERE m.message_key = $1" +
                     KeyShard(core, t, "m") + " " +
                     (with_tombstones ? "" : "AND m.payload IS NOT NULL ") +
                     "ORDER BY m.id DESC LIMIT $2",
                 pg::Params().Add(key).Add(limit));
    return ParseAllStored(kOp, r);
  });
}

}  // namespace compaction::detail
