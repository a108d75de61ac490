// Topic registry: registration, lookup, listing and removal.
#include "topics.hpp"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <vector>

#include "compaction/client.hpp"
#include "compaction/topic_events.hpp"
#include "lock.hpp"
#include "pg/errors.hpp"
#include "produce.hpp"
#include "schema.hpp"
#include "tx_internal.hpp"
#include "validate.hpp"

namespace compaction::detail {
namespace {

// How long Destroy waits for the locks it needs.
constexpr std::chrono::milliseconds kDestroyLockTimeout{5000};

// The topic columns every lookup selects first, in ParseTopic's order.
constexpr const char* kTopicColumns =
    "t.id, t.name, t.headless_ttl_ms, t.retention_ms, "
    "t.tombstone_retention_ms, t.partitions, t.consumer_inactive_after_ms";
constexpr int kTopicColumnCount = 7;

TopicInfo ParseTopic(const pg::Result& r, int row) {
  using std::chrono::milliseconds;
  return TopicInfo{pg::Int64(r, row, 0),
                   std::string(pg::Text(r, row, 1)),
                   milliseconds(pg::Int64(r, row, 2)),
                   milliseconds(pg::Int64(r, row, 3)),
                   milliseconds(pg::Int64(r, row, 4)),
                   static_cast<int>(pg::Int64(r, row, 5)),
                   milliseconds(pg::Int64(r, row, 6))};
}

std::optional<std::int64_t> Millis(
    const std::optional<std::chrono::milliseconds>& d) {
  if (!d) return std::nullopt;
  return d->count();
}

// The topic's recorded baseline, version and fingerprint in columns `col`
// and `col + 1` (NULL when none is recorded), must be this build's.
void CheckTopicVersion(const char* operation, const TopicInfo& topic,
                       const pg::Result& r, int col) {
  const int version =
      pg::IsNull(r, 0, col) ? 0 : static_cast<int>(pg::Int64(r, 0, col));
  std::optional<std::string_view> fingerprint;
  if (!pg::IsNull(r, 0, col + 1)) fingerprint = pg::Text(r, 0, col + 1);
  CheckTopicBaseline(operation, topic.name, version, fingerprint);
}

// Tells TopicEventListeners that the topic set changed; delivered on
// commit (register_topic() in system_v1.sql sends the same).
void NotifyTopicChange(ClientCore& core, pg::Session session,
                       const std::string& name, const char* event) {
  pg::Exec(session, "NotifyTopicChange",
           "SELECT pg_catalog.pg_notify($4::text, "
           "pg_catalog.json_build_object('schema', $1::text, 'topic', "
           "$2::text, 'event', $3::text)::text)",
           pg::Params()
               .Add(core.options().schema)
               .Add(name)
               .Add(std::string(event))
               .Add(std::string(kTopicEventChannel)));
}

// What a Register that asks an existing topic for other partitions gets.
InvalidArgument PartitionsFixed(const std::string& name, int requested) {
  return InvalidArgument("Register", "partitions of topic \"" + name +
                                         "\" are fixed at its creation (" +
                                         std::to_string(requested) +
                                         " requested)");
}

// Before register_topic: when the topic exists with another value of a
// setting the caller set, changes it as the caller (in autocommit, like
// the registration after it). The application role is refused (42501).
void UpdateChangedSettings(ClientCore& core, pg::Session s,
                           const std::string& name, const TopicConfig& config) {
  constexpr const char* kOp = "Register";
  if (!config.headless_ttl && !config.retention &&
      !config.tombstone_retention && !config.consumer_inactive_after) {
    return;
  }
  pg::Params params;
  params.Add(name)
      .Add(Millis(config.headless_ttl))
      .Add(Millis(config.retention))
      .Add(Millis(config.tombstone_retention))
      .Add(Millis(config.consumer_inactive_after));
  const std::string differs =
      "($2::bigint <> t.headless_ttl_ms OR $3::bigint <> t.retention_ms OR "
      "$4::bigint <> t.tombstone_retention_ms OR "
      "$5::bigint <> t.consumer_inactive_after_ms)";
  pg::Result found =
      pg::Exec(s, kOp,
               "SELECT " + differs + ", t.partitions FROM " + core.schema() +
                   ".topic t WHERE t.name = $1::text",
               params);
  if (found.rows() == 0) return;  // new: register_topic applies them
  // Refused before the UPDATE commits the other settings, not after it by
  // register_topic: an InvalidArgument writes nothing.
  if (config.partitions && *config.partitions != pg::Int64(found, 0, 1)) {
    throw PartitionsFixed(name, *config.partitions);
  }
  if (pg::IsNull(found, 0, 0) || !pg::Bool(found, 0, 0)) return;  // same
  try {
    pg::Exec(s, kOp,
             "UPDATE " + core.schema() +
                 ".topic t SET headless_ttl_ms = coalesce($2::bigint, "
                 "t.headless_ttl_ms), retention_ms = coalesce($3::bigint, "
                 "t.retention_ms), tombstone_retention_ms = "
                 "coalesce($4::bigint, t.tombstone_retention_ms), "
                 "consumer_inactive_after_ms = coalesce($5::bigint, "
                 "t.consumer_inactive_after_ms), updated_at = pg_catalog.now() "
                 "WHERE t.name = $1::text",
             params);
  } catch (const DatabaseError& e) {
    if (e.sqlstate() != pg::kInsufficientPrivilege) throw;
    throw DatabaseError(
        kOp, e.sqlstate(),
        "changing the settings of existing topic \"" + name +
            "\" needs the owner role (run compactiond topic register as the "
            "owner); this role may register it with its current settings or "
            "none");
  }
}

}  // namespace

[[noreturn]] void RethrowSchemaMissing(const ClientCore& core,
                                       const char* operation,
                                       const DatabaseError& error) {
  if (error.sqlstate() == pg::kUndefinedTable ||
      error.sqlstate() == pg::kInvalidSchemaName) {
    throw SchemaVersionMismatch(operation, "schema " + core.schema(), 0,
                                kSystemBaselineVersion);
  }
  throw error;
}

namespace {

// A topic's row and baseline by name, the fingerprint read by
// `fingerprint` (an SQL expression over schema_version v), and the
// session's lock_timeout: the columns ParseResolvedTopic reads.
std::string TopicByNameSql(const std::string& schema, const char* fingerprint) {
  return std::string("SELECT ") + kTopicColumns + ", v.version, " +
         fingerprint + ", pg_catalog.current_setting('lock_timeout') FROM " +
         schema + ".topic t LEFT JOIN " + schema +
         ".schema_version v ON v.topic_id = t.id WHERE t.name = $1::text";
}

}  // namespace

std::string ResolveTopicSql(const std::string& schema) {
  // The fingerprint through to_jsonb: a database from a build before the
  // column existed answers NULL instead of failing (and aborting the
  // caller's transaction).
  return TopicByNameSql(schema, "pg_catalog.to_jsonb(v) ->> 'fingerprint'");
}

// The fingerprint read straight from its column: the look-up every
// transaction's first statement carries (RunWithLookup), and about 13 us
// of the server's time less than through to_jsonb (test/bench/RESULTS.md).
// On a database from a build before the column it fails; RunWithLookup then
// rolls back the transaction it began, which holds nothing of the
// caller's, and the long way says SchemaVersionMismatch.
std::string LookupTopicSql(const std::string& schema) {
  return TopicByNameSql(schema, "v.fingerprint");
}

pg::Statement ResolveTopicStatement(const ClientCore& core,
                                    const std::string& name) {
  return {core.resolve_sql(), pg::Params().Add(name)};
}

TopicInfo ParseResolvedTopic(const pg::Result& r, const char* operation,
                             const std::string& name,
                             std::string* lock_timeout) {
  if (r.rows() == 0) throw TopicNotFound(operation, name);
  TopicInfo topic = ParseTopic(r, 0);
  CheckTopicVersion(operation, topic, r, kTopicColumnCount);
  if (lock_timeout != nullptr) {
    *lock_timeout = pg::Text(r, 0, kTopicColumnCount + 2);
  }
  return topic;
}

TopicInfo ResolveTopic(ClientCore& core, pg::Session session,
                       const char* operation, const std::string& name,
                       std::string* lock_timeout) {
  ValidateTopicName(operation, name);
  pg::Result r;
  try {
    r = pg::Exec(session, operation, core.resolve_sql(),
                 pg::Params().Add(name));
  } catch (const DatabaseError& e) {
    RethrowSchemaMissing(core, operation, e);
  }
  TopicInfo topic = ParseResolvedTopic(r, operation, name, lock_timeout);
  // Whoever looked it up, the next transaction sends the look-up with its
  // first statement (RunWithLookup), which still checks it. Not what a
  // borrowed connection found: it may reach another database.
  if (session.server != nullptr) core.CacheTopic(topic);
  return topic;
}

namespace {

// The errors of a statement that names a table, column, function or schema
// the database does not have.
bool NamesMissingObject(const DatabaseError& e) {
  return e.sqlstate() == pg::kUndefinedTable ||
         e.sqlstate() == pg::kUndefinedColumn ||
         e.sqlstate() == pg::kUndefinedFunction ||
         e.sqlstate() == pg::kInvalidSchemaName;
}

}  // namespace

std::optional<LookedUp> RunWithLookup(
    ClientCore& core, pg::Session session, const char* operation,
    const std::string& name,
    const std::function<std::vector<pg::Statement>(const TopicInfo&)>& build) {
  const std::optional<TopicInfo> cached = core.CachedTopic(name);
  if (!cached || !session.needs_begin()) return std::nullopt;
  std::vector<pg::Statement> statements = build(*cached);
  statements.insert(statements.begin(),
                    pg::Statement(core.lookup_sql(), pg::Params().Add(name)));
  std::vector<pg::Result> r;
  try {
    r = pg::ExecPipelinedResults(session, operation, statements);
  } catch (const DatabaseError& e) {
    // Preparing one of them failed, with nothing sent (the connection is
    // still outside a transaction): the look-up names a column a schema
    // from an older build lacks, or a statement built under the cached id
    // names objects that are gone. The long way decides.
    if (!NamesMissingObject(e) || !session.needs_begin()) throw;
    core.ForgetTopic(name);
    return std::nullopt;
  }
  // The look-up is judged first: a statement that ran under an id that is
  // no longer the topic's, and failed there, says nothing of the topic. A
  // look-up that failed itself (a schema without the columns it names)
  // takes the long way too.
  std::optional<TopicInfo> found;
  std::string lock_timeout;
  if (pg::Succeeded(r[0].get())) {
    try {
      found = ParseResolvedTopic(r[0], operation, name, &lock_timeout);
    } catch (const Error&) {
      // Not found, or a schema of another version: the long way says so,
      // with nothing written.
    }
  }
  if (found && found->id == cached->id &&
      found->partitions == cached->partitions) {
    for (const pg::Result& result : r) {
      if (!pg::Succeeded(result.get())) {
        // The first that failed (the server skipped the rest), as on the
        // long way.
        pg::ThrowError(operation, session.conn, result);
      }
    }
    r.erase(r.begin());
    return LookedUp{std::move(*found), std::move(r), std::move(lock_timeout)};
  }
  pg::RollbackQuietly(session);
  // The next transaction goes the long way at once, or pipelines the id
  // this look-up found.
  if (found) {
    core.CacheTopic(*found);
  } else {
    core.ForgetTopic(name);
  }
  return std::nullopt;
}

TopicInfo RegisterTopic(ClientCore& core, const std::string& name,
                        const TopicConfig& config) {
  constexpr const char* kOp = "Register";
  ValidateTopicName(kOp, name);
  if (config.headless_ttl) ValidateHeadlessTtl(kOp, *config.headless_ttl);
  if (config.retention) {
    ValidateRetention(kOp, "retention", *config.retention);
  }
  if (config.tombstone_retention) {
    ValidateRetention(kOp, "tombstone_retention", *config.tombstone_retention);
  }
  if (config.partitions) {
    ValidateLimit(kOp, "partitions", *config.partitions, kMaxPartitions);
  }
  if (config.consumer_inactive_after) {
    ValidateTtl(kOp, "consumer_inactive_after",
                *config.consumer_inactive_after);
  }
  std::optional<std::int64_t> partitions;
  if (config.partitions) partitions = *config.partitions;
  // register_topic (sql/system_v1.sql) upserts the row, creates a new
  // topic's tables, grants the shipped roles and notifies, as the schema's
  // owner, so a role allowed to execute it registers without any DDL
  // privilege of its own. An unset field is NULL: a new topic gets the
  // default, an existing one keeps its value. It never changes an existing
  // topic's settings: that is an UPDATE of the topic row as the caller,
  // which only the owner role (or a role it granted that UPDATE) may do.
  pg::Result r = WithConnection(core, kOp, [&](pg::Session s) {
    // The installed register_topic is the system baseline's: one of another
    // build could treat the settings differently, so check it first.
    RequireSystemBaseline(core, s, kOp);
    try {
      UpdateChangedSettings(core, s, name, config);
      return pg::Exec(s, kOp,
                      std::string("SELECT ") + kTopicColumns +
                          ", t.version, t.fingerprint FROM " + core.schema() +
                          ".register_topic($1::text, $2::bigint, $3::bigint, "
                          "$4::bigint, $5::integer, $6::bigint) t",
                      pg::Params()
                          .Add(name)
                          .Add(Millis(config.headless_ttl))
                          .Add(Millis(config.retention))
                          .Add(Millis(config.tombstone_retention))
                          .Add(partitions)
                          .Add(Millis(config.consumer_inactive_after)));
    } catch (const DatabaseError& e) {
      // Only register_topic raises this: partitions differ from the
      // existing topic's, which are fixed at its creation.
      if (e.sqlstate() == pg::kInvalidParameterValue && config.partitions) {
        throw PartitionsFixed(name, *config.partitions);
      }
      RethrowSchemaMissing(core, kOp, e);
    }
  });
  TopicInfo topic = ParseTopic(r, 0);
  CheckTopicVersion(kOp, topic, r, kTopicColumnCount);
  core.CacheTopic(topic);
  return topic;
}

void DestroyTopic(ClientCore& core, const std::string& name) {
  constexpr const char* kOp = "Destroy";
  ValidateTopicName(kOp, name);
  Tx tx = BeginTx(core);
  const pg::Session session = TxGate::State(tx).session();
  // DROP TABLE waits for every transaction that touched the tables, and
  // every later statement on them queues behind it: behind a long
  // transaction, fail with LockTimeout instead of stalling the topic.
  pg::Exec(
      session, kOp,
      "SELECT pg_catalog.set_config('lock_timeout', $1::text, true)",
      pg::Params().Add(std::to_string(kDestroyLockTimeout.count()) + "ms"));
  pg::Result r = pg::Exec(session, kOp,
                          "DELETE FROM " + core.schema() +
                              ".topic WHERE name = $1::text RETURNING id",
                          pg::Params().Add(name));
  if (r.rows() == 0) throw TopicNotFound(kOp, name);
  const std::int64_t id = pg::Int64(r, 0, 0);
  pg::ExecScript(
      session, kOp,
      "DROP TABLE " + core.HeadTable(id) + ", " + core.MessageTable(id) +
          "; DROP FUNCTION IF EXISTS " + core.schema() + ".produce_" +
          std::to_string(id) +
          "(text, integer, bigint, jsonb); DROP FUNCTION IF EXISTS " +
          core.schema() + ".produce_batch_" + std::to_string(id) +
          "(text[], integer[], bigint[], jsonb[], text[]); DROP FUNCTION IF "
          "EXISTS " +
          core.schema() + ".lock_" + std::to_string(id) +
          "(text, boolean); DROP FUNCTION IF EXISTS " + core.schema() +
          ".in_partition_" + std::to_string(id) + "(text, integer)" +
          (core.citus() ? "; DROP FUNCTION IF EXISTS " + core.schema() +
                              ".produce_plain_" + std::to_string(id) +
                              "(text, integer, jsonb)"
                        : std::string()));
  NotifyTopicChange(core, session, name, "destroyed");
  tx.Commit();
  core.ForgetTopic(name);
}

TopicInfo FindTopic(ClientCore& core, const std::string& name) {
  return WithConnection(core, "FindTopic", [&](pg::Session s) {
    return ResolveTopic(core, s, "FindTopic", name);
  });
}

const TopicSql& ClientCore::Sql(const TopicInfo& topic) {
  // Slots are numbered across the process, not per client: a transaction of
  // one client may run another client's topic statements on its connection,
  // and equal slots would make them prepare again on every call.
  static std::atomic<std::size_t> next_slot{kFirstTopicSlot};
  const bool on_citus = citus();
  std::lock_guard lock(sql_mutex_);
  std::unique_ptr<const TopicSql>& slot = sql_[on_citus][topic.id];
  if (!slot || slot->partitions != topic.partitions) {
    // The old entry stays alive if another thread holds it: entries are
    // only replaced when a schema was installed again (see TopicSql).
    if (slot) retired_sql_.push_back(std::move(slot));
    const std::size_t at = next_slot.fetch_add(TopicSql::kSlots);
    slot = std::make_unique<const TopicSql>(
        TopicSql{topic.partitions,
                 {LockSql(*this, topic.id), at},
                 {LockRowSql(*this, topic.id), at + 1},
                 {ReadLockedHeadSql(*this, topic.id), at + 2},
                 {CompactedInsertSql(*this, topic.id), at + 3},
                 {PlainInsertSql(*this, topic, true), at + 4},
                 {PlainInsertSql(*this, topic, false), at + 5},
                 {ProduceBatchSql(*this, topic.id), at + 6},
                 {ReadHeadSql(*this, topic), at + 7},
                 {InsertLockSql(*this, topic.id), at + 8}});
    static_assert(TopicSql::kSlots == 9, "one slot per statement above");
  }
  return *slot;
}

}  // namespace compaction::detail

namespace compaction {

std::vector<TopicInfo> Client::ListTopics() const {
  return detail::WithConnection(*core_, "ListTopics", [&](pg::Session s) {
    pg::Result r;
    try {
      r = pg::Exec(s, "ListTopics",
                   std::string("SELECT ") + detail::kTopicColumns + " FROM " +
                       core_->schema() + ".topic t ORDER BY t.name");
    } catch (const DatabaseError& e) {
      detail::RethrowSchemaMissing(*core_, "ListTopics", e);
    }
    std::vector<TopicInfo> out;
    for (int row = 0; row < r.rows(); ++row) {
      out.push_back(detail::ParseTopic(r, row));
    }
    return out;
  });
}

}  // namespace compaction
