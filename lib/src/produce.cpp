// Producing: append to the message log and, for a compacted message, upsert
// the key's head with the winner rule in the same statement.
#include "produce.hpp"

#include <chrono>
#include <optional>

#include "commit_outcome.hpp"
#include "compaction/tx.hpp"
#include "core.hpp"
#include "locked_keys.hpp"
#include "pg/sqlstate.hpp"
#include "rows.hpp"
#include "topics.hpp"
#include "tx_internal.hpp"
#include "validate.hpp"

namespace compaction::detail {

void ValidateProduce(const char* op, const Outgoing& message,
                     const ProduceOptions& options) {
  if (message.tombstone && !options.compaction) {
    throw InvalidArgument(op, "a tombstone needs compaction options");
  }
  if (options.compaction && !options.message_key) {
    throw InvalidArgument(op, message.tombstone
                                  ? "a tombstone needs a message key"
                                  : "a compacted message needs a message key");
  }
  if (options.message_key) ValidateMessageKey(op, *options.message_key);
  if (message.schema_version < 1 ||
      message.schema_version > kMaxSchemaVersion) {
    throw InvalidArgument(op, "schema_version must be in 1.." +
                                  std::to_string(kMaxSchemaVersion) + ", got " +
                                  std::to_string(message.schema_version));
  }
}

std::string PartitionOfKeySql(const std::string& key_sql, int partitions) {
  const std::string n = std::to_string(partitions) + "::bigint";
  return "((pg_catalog.hashtextextended(" + key_sql + ", 0::bigint) % " + n +
         " + " + n + ") % " + n + ")::integer";
}

namespace {

constexpr const char* kOp = "Produce";

// Assigns the transaction its xid before the insert draws its message id.
// The log cleaner's position turns final once every xid older than a pass's
// snapshot has ended (sql/system_v1.sql, log_cleaner_state); a transaction
// that drew an id before getting an xid would escape that wait and could
// commit a message below a final position. The materialized CTE is scanned
// before the insert computes its row, identity default included.
constexpr const char* kXidFirst =
    "xid_first AS MATERIALIZED (SELECT pg_catalog.pg_current_xact_id())";

}  // namespace

// A keyed message names its key's partition (sql/topic_v1.sql, the
// partition column and its CHECK); an unkeyed one takes the column's
// default, which spreads by the id the row draws.
std::string PlainInsertSql(const ClientCore& core, const TopicInfo& topic,
                           bool keyed) {
  // On Citus this INSERT .. SELECT from a CTE would go through the
  // coordinator with a two-phase commit: the topic's produce_plain_<id>
  // (sql/citus_topic_v1.sql) takes the xid first too, then inserts with a
  // statement Citus routes to the row's shard.
  if (core.citus()) {
    return "/* compaction:Produce */ SELECT p.message_id, " +
           Micros("p.message_created_at") + ", false FROM " + core.schema() +
           ".produce_plain_" + std::to_string(topic.id) +
           "($1::text, $2::integer, $3::jsonb) p";
  }
  return std::string("/* compaction:Produce */ WITH ") + kXidFirst +
         " INSERT INTO " + core.MessageTable(topic.id) +
         (keyed ? " (message_key, schema_version, payload, partition) "
                  "SELECT $1::text, $2::integer, $3::jsonb, " +
                      PartitionOfKeySql("$1::text", topic.partitions)
                : std::string(" (message_key, schema_version, payload) "
                              "SELECT $1::text, $2::integer, $3::jsonb")) +
         " FROM xid_first RETURNING id, " + Micros("created_at") + ", false";
}

// The message and its head move in one call of the topic's SECURITY
// DEFINER function (sql/topic_v1.sql, produce_<id>): the application role
// has no write grant on the head columns. The function assigns the xid
// before the insert draws the id, as kXidFirst does here, and keeps the
// head advances HOT.
std::string CompactedInsertSql(const ClientCore& core, std::int64_t id) {
  return "/* compaction:Produce */ SELECT p.message_id, " +
         Micros("p.message_created_at") + ", p.advanced FROM " + core.schema() +
         ".produce_" + std::to_string(id) +
         "($1::text, $2::integer, $4::bigint, $3::jsonb) p";
}

namespace {

pg::Statement BuildProduce(ClientCore& core, const TopicInfo& topic,
                           const Outgoing& message,
                           const ProduceOptions& options) {
  const TopicSql& sql = core.Sql(topic);
  pg::Params params;
  params.Add(options.message_key).Add(message.schema_version);
  if (message.tombstone) {
    params.AddNull();  // a tombstone's payload is SQL NULL
  } else {
    params.Add(message.payload_json);
  }
  if (options.compaction) {
    params.Add(options.compaction->rank);
    return {sql.produce_compacted, std::move(params)};
  }
  return {options.message_key ? sql.produce_keyed : sql.produce_unkeyed,
          std::move(params)};
}

ProduceResult Decode(const pg::Result& r) {
  return ProduceResult{pg::Int64(r, 0, 0), FromMicros(pg::Int64(r, 0, 1)),
                       pg::Bool(r, 0, 2), 0};
}

// The message as a broken COMMIT looks for it (commit_outcome.hpp).
WrittenMessage Written(const TopicInfo& topic, const ProduceOptions& options,
                       const ProduceResult& result) {
  return WrittenMessage{topic.id, result.id, options.message_key,
                        std::chrono::duration_cast<std::chrono::microseconds>(
                            result.created_at.time_since_epoch())
                            .count()};
}

ProduceResult Run(ClientCore& core, pg::Session s, const TopicInfo& topic,
                  const Outgoing& message, const ProduceOptions& options) {
  const pg::Statement st = BuildProduce(core, topic, message, options);
  pg::Result r = pg::ExecStatement(s, kOp, st);
  return Decode(r);
}

// A produce in a transaction of its own. When the connection breaks during
// its COMMIT, the message it got back (id, created_at) is looked for on a
// new connection instead of leaving the outcome to the caller.
ProduceResult RunCommitted(ClientCore& core, pg::Session s,
                           const TopicInfo& topic, const Outgoing& message,
                           const ProduceOptions& options) {
  pg::CommittedExec done =
      pg::ExecCommitted(s, kOp, BuildProduce(core, topic, message, options),
                        ResultBeforeCommit(core));
  std::optional<ProduceResult> result;
  if (done.rows) result = Decode(done.rows);
  if (!done.in_doubt && result) return *result;
  std::optional<WrittenMessage> effect;
  if (result) effect = Written(topic, options, *result);
  ResolveBrokenCommit(core, kOp, s.server, effect);
  if (!result) throw InternalError(kOp, "committed without a result");
  return *result;
}

}  // namespace

ProduceResult Produce(ClientCore& core, const std::string& topic,
                      const Outgoing& message, const ProduceOptions& options) {
  ValidateTopicName(kOp, topic);
  ValidateProduce(kOp, message, options);
  // One statement in autocommit mode: message and head commit together.
  // WithTopic re-resolves a cached topic that was destroyed meanwhile.
  return WithTopic(core, kOp, topic, [&](pg::Session s, const TopicInfo& t) {
    return RunCommitted(core, s, t, message, options);
  });
}

ProduceResult ProduceInTx(ClientCore& core, Tx& tx, const std::string& topic,
                          const Outgoing& message,
                          const ProduceOptions& options) {
  ValidateTopicName(kOp, topic);
  ValidateProduce(kOp, message, options);
  TxState& state = TxGate::State(tx);
  const pg::Session s = state.WritingSessionFor(kOp);
  // Resolved through the caller's transaction (a plain read: a topic that
  // is gone is TopicNotFound and the transaction stays usable), unless it
  // already touched the topic's tables, which a Destroy then waits for.
  std::optional<TopicInfo> info = state.TouchedTopic(topic);
  std::optional<ProduceResult> first;
  if (!info) {
    // A transaction's first statement: BEGIN, the look-up and the produce
    // in one round trip.
    std::optional<LookedUp> done =
        RunWithLookup(core, s, kOp, topic, [&](const TopicInfo& t) {
          RefuseUncompactedLockedKey(state, t.id, options);
          std::vector<pg::Statement> produce;
          produce.push_back(BuildProduce(core, t, message, options));
          return produce;
        });
    if (done) {
      info = std::move(done->topic);
      first = Decode(done->results.front());
    }
  }
  if (!info) info = ResolveTopic(core, s, kOp, topic);
  RefuseUncompactedLockedKey(state, info->id, options);
  try {
    ProduceResult result =
        first ? *first : Run(core, s, *info, message, options);
    state.RememberTouchedTopic(*info);
    state.RememberWritten(Written(*info, options, result));
    return result;
  } catch (const DatabaseError& e) {
    // Destroyed between the lookup and the insert (the statement failed,
    // so the transaction is aborted now): its table, or for a compacted
    // produce its function produce_<id>, is gone.
    if (e.sqlstate() == pg::kUndefinedTable ||
        e.sqlstate() == pg::kUndefinedFunction) {
      throw TopicNotFound(kOp, topic);
    }
    throw;
  }
}

ProduceResult ProduceAndCommit(ClientCore& core, Tx& tx,
                               const std::string& topic,
                               const Outgoing& message,
                               const ProduceOptions& options) {
  TxState& state = TxGate::State(tx);
  std::optional<TopicInfo> info = state.TouchedTopic(topic);
  if (!info || state.borrowed()) {
    ProduceResult result = ProduceInTx(core, tx, topic, message, options);
    tx.Commit();
    return result;
  }
  ValidateProduce(kOp, message, options);
  const pg::Session s = state.WritingSessionFor(kOp);
  RefuseUncompactedLockedKey(state, info->id, options);
  pg::CommittedExec done;
  try {
    done =
        pg::ExecAndCommit(s, kOp, BuildProduce(core, *info, message, options),
                          ResultBeforeCommit(core));
  } catch (...) {
    // The server refused the produce (and so skipped COMMIT) or COMMIT, or
    // nothing was sent: nothing was committed. The connection goes back to
    // the pool outside any transaction.
    pg::RollbackQuietly(s);
    state.Finish(TxStatus::kAborted);
    throw;
  }
  std::optional<ProduceResult> result;
  if (done.rows) {
    result = Decode(done.rows);
    state.RememberWritten(Written(*info, options, *result));
  }
  if (done.in_doubt) ResolveTxCommit(state, kOp);  // throws unless committed
  if (!result) throw InternalError(kOp, "committed without a result");
  state.Finish(TxStatus::kCommitted);
  return *result;
}

}  // namespace compaction::detail
