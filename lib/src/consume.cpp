// Consumers: Poll's position lock and move, Wait's probe.
#include <algorithm>
#include <chrono>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "compaction/consumer.hpp"
#include "consume_read.hpp"
#include "topics.hpp"
#include "tx_internal.hpp"
#include "validate.hpp"

namespace compaction::detail {
namespace {

constexpr const char* kPollOp = "Poll";

// How often Wait probes. A commit is seen within one interval plus a probe,
// well inside the 100 ms promised; produces pay nothing.
//
// Most probes are quick: the log's newest committed id and the
// transactions that hold its RowExclusiveLock, against what they were when
// a probe of every position found nothing new (its snapshot S). Whatever
// commits after S either draws its ids after S (above that newest id), or
// was inserting before S and so held the lock when S was taken: it is in
// the set this statement or the one before it read, and its end shows as
// a writer gone. Either change sends the next probe to every position. The
// one ordering that escapes it, a writer that began inserting between
// those two statements and ended between S and the lock read of the same
// statement, is caught by the full probe every kQuickProbesPerFull probes.
// An idle waiter thus costs one index descent per probe, not one or two
// per partition (2.5 ms a probe at 1,024 partitions, test/bench/RESULTS.md).
constexpr std::chrono::milliseconds kWaitProbeInterval{25};
constexpr int kQuickProbesPerFull = 40;  // about a second

std::string Positions(const ClientCore& core) {
  return core.schema() + ".consumer_position";
}

// On Citus, the consumer's partitions that may have something new (an
// open window, or a message its done snapshot did not see), as an integer
// array literal. The positions live on the coordinator and cannot join
// the shards: each partition's look is a statement routed to its shard
// with D as a parameter, all pipelined in one round trip. `positions`:
// whether the consumer has any.
std::string CitusHasNew(ClientCore& core, pg::Session s, const TopicInfo& t,
                        const std::string& consumer, bool& positions) {
  const std::string message = core.MessageTable(t.id);
  pg::Result p =
      pg::Exec(s, "Poll",
               "/* compaction:Poll:positions */ SELECT p.partition, "
               "p.done_snapshot::text, p.read_snapshot IS NOT NULL FROM " +
                   Positions(core) +
                   " p WHERE p.topic_id = $1::bigint AND p.consumer = $2::text "
                   "ORDER BY p.partition",
               pg::Params().Add(t.id).Add(consumer));
  positions = p.rows() > 0;
  std::vector<int> open;
  std::vector<int> looked;
  std::vector<pg::Statement> looks;
  for (int row = 0; row < p.rows(); ++row) {
    const int partition = static_cast<int>(pg::Int64(p, row, 0));
    if (pg::Bool(p, row, 2)) {
      open.push_back(partition);
      continue;
    }
    looked.push_back(partition);
    looks.push_back(
        {"/* compaction:Poll:has_new */ SELECT EXISTS (SELECT 1 FROM " +
             message +
             " m WHERE m.partition = $1::integer AND m.xid >= "
             "pg_catalog.pg_snapshot_xmax($2::pg_snapshot)) OR EXISTS (SELECT "
             "1 FROM " +
             message +
             " m WHERE m.partition = $1::integer AND m.xid = ANY (ARRAY("
             "SELECT pg_catalog.pg_snapshot_xip($2::pg_snapshot))))",
         pg::Params().Add(partition).Add(std::string(pg::Text(p, row, 1)))});
  }
  if (!looks.empty()) {
    const std::vector<pg::Result> r = pg::ExecPipelined(s, "Poll", looks);
    for (size_t i = 0; i < r.size(); ++i) {
      if (pg::Bool(r[i], 0, 0)) open.push_back(looked[i]);
    }
  }
  std::string out = "{";
  for (const int partition : open) {
    if (out.size() > 1) out += ',';
    out += std::to_string(partition);
  }
  return out + "}";
}

// Locks one position of the consumer that no other transaction holds:
// first one that may have something new, then the least recently polled,
// so one instance visits every partition in turn. An empty result: none
// exists yet, or every one is held.
std::string LockSql(const ClientCore& core, const TopicInfo& topic) {
  // With one partition there is nothing to choose. On Citus the positions
  // (on the coordinator) cannot be joined with the shards: $3 lists the
  // partitions CitusHasNew found something in.
  const std::string order = topic.partitions == 1 ? "p.partition"
                            : core.citus()
                                ? "p.partition = ANY ($3::integer[]) DESC, "
                                  "p.last_poll_at, p.partition"
                                : HasNewSql(core.MessageTable(topic.id)) +
                                      " DESC, p.last_poll_at, p.partition";
  return "/* compaction:Poll:lock */ SELECT p.partition, "
         "p.done_snapshot::text, p.read_snapshot::text, p.cursor_xid::text, "
         "p.cursor_id FROM " +
         Positions(core) +
         " p WHERE p.topic_id = $1::bigint AND p.consumer = $2::text "
         "ORDER BY " +
         order + " LIMIT 1 FOR UPDATE OF p SKIP LOCKED";
}

// Takes a position, creating the consumer's positions (at the start of the
// topic) when it has none. False when every position is held elsewhere.
// `first`: the lock statement's result when it already ran (pipelined
// with the topic's look-up).
bool LockPosition(ClientCore& core, pg::Session s, const TopicInfo& topic,
                  const std::string& consumer, int& partition,
                  Position& position, pg::Result first = pg::Result()) {
  const std::string lock = LockSql(core, topic);
  const pg::Params params = pg::Params().Add(topic.id).Add(consumer);
  const bool choose = core.citus() && topic.partitions > 1;
  const auto lock_params = [&] {
    if (!choose) return params;
    bool positions = false;
    return pg::Params().Add(topic.id).Add(consumer).Add(
        CitusHasNew(core, s, topic, consumer, positions));
  };
  pg::Result r =
      first ? std::move(first) : pg::Exec(s, kPollOp, lock, lock_params());
  if (r.rows() == 0) {
    // Nothing free: every position is held, or none exists yet. Asked
    // first because an insert would wait on a held row (its holder's
    // update is uncommitted) instead of skipping it.
    pg::Result exists =
        pg::Exec(s, kPollOp,
                 "SELECT EXISTS (SELECT 1 FROM " + Positions(core) +
                     " p WHERE p.topic_id = $1::bigint AND p.consumer = "
                     "$2::text)",
                 params);
    if (pg::Bool(exists, 0, 0)) return false;
    // One that meets another instance's uncommitted insert waits for it,
    // then skips its rows.
    pg::Result made = pg::Exec(
        s, kPollOp,
        "INSERT INTO " + Positions(core) +
            " (topic_id, consumer, partition, done_snapshot) SELECT "
            "$1::bigint, $2::text, g.g, $3::pg_snapshot FROM "
            "pg_catalog.generate_series(0, $4::integer - 1) g (g) "
            "ON CONFLICT ON CONSTRAINT consumer_position_pkey DO NOTHING "
            "RETURNING partition",
        pg::Params()
            .Add(topic.id)
            .Add(consumer)
            .Add(std::string(kStartSnapshot))
            .Add(topic.partitions));
    if (made.rows() == 0) return false;
    r = pg::Exec(s, kPollOp, lock, lock_params());
    if (r.rows() == 0) return false;
  }
  const pg::Result& row = r;
  partition = static_cast<int>(pg::Int64(row, 0, 0));
  position.done = std::string(pg::Text(row, 0, 1));
  if (!pg::IsNull(row, 0, 2)) position.read = std::string(pg::Text(row, 0, 2));
  if (!pg::IsNull(row, 0, 3)) {
    position.cursor_xid = std::string(pg::Text(row, 0, 3));
  }
  position.cursor_id = pg::OptInt64(row, 0, 4);
  return true;
}

// The first Poll of a transaction: the topic's look-up and the position
// lock in one round trip, the lock built from the client's cached topic.
// Only for a single partition, whose lock statement names no message table:
// a cached id whose table was dropped (the topic destroyed, perhaps
// re-created) would otherwise fail the lock and abort the caller's
// transaction. A re-created topic's positions carry its new id, so the
// stale lock finds no row and the lock runs again with what was resolved.
// Empty `lock` when there is no such cached topic.
TopicInfo ResolveAndLock(ClientCore& core, pg::Session s,
                         const std::string& topic, const std::string& consumer,
                         pg::Result& lock) {
  const std::optional<TopicInfo> cached = core.CachedTopic(topic);
  if (!cached || cached->partitions != 1) {
    return ResolveTopic(core, s, kPollOp, topic);
  }
  std::vector<pg::Result> r;
  try {
    r = pg::ExecPipelined(
        s, kPollOp,
        {ResolveTopicStatement(core, topic),
         {LockSql(core, *cached), pg::Params().Add(cached->id).Add(consumer)}});
  } catch (const DatabaseError& e) {
    RethrowSchemaMissing(core, kPollOp, e);
  }
  TopicInfo info;
  try {
    info = ParseResolvedTopic(r[0], kPollOp, topic);
  } catch (const TopicNotFound&) {
    core.ForgetTopic(topic);
    throw;
  }
  if (info.id == cached->id) {
    lock = std::move(r[1]);
  } else {
    core.CacheTopic(info);
  }
  return info;
}

// The log's newest committed id and the transactions that may write it
// (those holding its RowExclusiveLock: an INSERT takes it before it draws
// an id and keeps it to its end), as one statement saw them.
struct LogMark {
  std::int64_t topic_id = 0;  // a re-created topic's ids start again
  std::int64_t max_id = 0;
  std::set<std::string> writers;  // pg_locks.virtualtransaction
};

// `table`: the parameter holding the message table's name.
std::string LogMarkColumns(const std::string& message,
                           const std::string& table) {
  return "coalesce((SELECT pg_catalog.max(m.id) FROM " + message +
         " m), 0), (SELECT pg_catalog.string_agg(l.virtualtransaction, ',') "
         "FROM pg_catalog.pg_locks l WHERE l.relation = " +
         table +
         "::regclass AND l.database = (SELECT d.oid FROM "
         "pg_catalog.pg_database d WHERE d.datname = "
         "pg_catalog.current_database()) AND l.mode = 'RowExclusiveLock')";
}

LogMark ReadMark(const pg::Result& r, int col) {
  LogMark mark;
  mark.max_id = pg::Int64(r, 0, col);
  if (pg::IsNull(r, 0, col + 1)) return mark;
  const std::string_view all = pg::Text(r, 0, col + 1);
  for (size_t at = 0; at <= all.size();) {
    const size_t comma = std::min(all.find(',', at), all.size());
    mark.writers.emplace(all.substr(at, comma - at));
    at = comma + 1;
  }
  return mark;
}

// One index descent and a look at the lock table, whatever the partitions.
LogMark ProbeLog(ClientCore& core, pg::Session s, const TopicInfo& t) {
  const std::string message = core.MessageTable(t.id);
  pg::Result r = pg::Exec(
      s, "Wait",
      "/* compaction:Wait:log */ SELECT " + LogMarkColumns(message, "$1::text"),
      pg::Params().Add(message));
  return ReadMark(r, 0);
}

bool ProbePositionsCitus(ClientCore& core, pg::Session s, const TopicInfo& t,
                         const std::string& consumer, LogMark& mark);

// Whether a Poll of the consumer may find something: a look at every
// position (an index probe or two per partition). Also the log's mark as
// this statement saw it.
bool ProbePositions(ClientCore& core, pg::Session s, const TopicInfo& t,
                    const std::string& consumer, LogMark& mark) {
  const std::string message = core.MessageTable(t.id);
  if (core.citus()) return ProbePositionsCitus(core, s, t, consumer, mark);
  // A consumer without positions has everything ahead of it.
  pg::Result r = pg::Exec(
      s, "Wait",
      "/* compaction:Wait */ SELECT CASE WHEN EXISTS (SELECT 1 FROM " +
          Positions(core) +
          " p WHERE p.topic_id = $1::bigint AND p.consumer = $2::text) "
          "THEN EXISTS (SELECT 1 FROM " +
          Positions(core) +
          " p WHERE p.topic_id = $1::bigint AND p.consumer = $2::text AND " +
          HasNewSql(message) + ") ELSE EXISTS (SELECT 1 FROM " + message +
          ") END, " + LogMarkColumns(message, "$3::text"),
      pg::Params().Add(t.id).Add(consumer).Add(message));
  mark = ReadMark(r, 1);
  return pg::Bool(r, 0, 0);
}

// ProbePositions on Citus: the log's mark first (reading it earlier than
// the positions only widens what the quick probes catch), then the
// partitions' looks.
bool ProbePositionsCitus(ClientCore& core, pg::Session s, const TopicInfo& t,
                         const std::string& consumer, LogMark& mark) {
  mark = ProbeLog(core, s, t);
  bool positions = false;
  const std::string found = CitusHasNew(core, s, t, consumer, positions);
  if (positions) return found != "{}";
  // LIMIT in the outer query: Citus stops each shard at one row.
  return pg::Exec(s, "Wait",
                  "/* compaction:Wait:any */ SELECT 1 FROM " +
                      core.MessageTable(t.id) + " m LIMIT 1")
             .rows() > 0;
}

}  // namespace

void ValidateConsumer(const std::string& topic, const std::string& consumer,
                      const ConsumerOptions& options) {
  constexpr const char* kOp = "Consumer";
  ValidateTopicName(kOp, topic);
  ValidateConsumerName(kOp, consumer);
  ValidateLimit(kOp, "batch_size", options.batch_size, kMaxConsumerBatch);
}

PolledBatch PollRead(ClientCore& core, Tx& tx, const std::string& topic,
                     const std::string& consumer,
                     const ConsumerOptions& options) {
  ValidateConsumer(topic, consumer, options);
  TxState& state = TxGate::State(tx);
  // READ COMMITTED: the read after the lock must see what the previous
  // holder of the position committed (consume_read.cpp).
  const pg::Session s = state.WritingSessionFor(kPollOp);
  std::optional<TopicInfo> info = state.TouchedTopic(topic);
  pg::Result first;
  if (!info) info = ResolveAndLock(core, s, topic, consumer, first);
  PolledBatch batch;
  batch.topic_id = info->id;
  Position position;
  // The lock (with more partitions) and the read name the message table: a
  // Destroy that committed since the look-up makes them fail with 42P01.
  try {
    if (!LockPosition(core, s, *info, consumer, batch.partition, position,
                      std::move(first))) {
      batch.partition = -1;
      return batch;
    }
    const Reader reader{kPollOp, topic, consumer};
    batch.deliveries =
        ReadBatch(core, s, reader, info->id, batch.partition,
                  options.heads_only, options.batch_size, position);
  } catch (const DatabaseError& e) {
    if (e.sqlstate() == pg::kUndefinedTable)
      throw TopicNotFound(kPollOp, topic);
    throw;
  }
  state.RememberTouchedTopic(*info);
  batch.done_snapshot = std::move(position.done);
  batch.read_snapshot = std::move(position.read);
  batch.cursor_xid = std::move(position.cursor_xid);
  batch.cursor_id = position.cursor_id;
  return batch;
}

void PollAdvance(ClientCore& core, Tx& tx, const std::string& consumer,
                 const PolledBatch& batch) {
  if (batch.partition < 0) return;
  const pg::Session s = TxGate::State(tx).WritingSessionFor(kPollOp);
  pg::Exec(s, kPollOp,
           "/* compaction:Poll:advance */ UPDATE " + Positions(core) +
               " SET done_snapshot = $4::pg_snapshot, "
               "read_snapshot = $5::pg_snapshot, cursor_xid = $6::xid8, "
               "cursor_id = $7::bigint, last_poll_at = pg_catalog.now() "
               "WHERE topic_id = $1::bigint AND consumer = $2::text "
               "AND partition = $3::integer",
           pg::Params()
               .Add(batch.topic_id)
               .Add(consumer)
               .Add(batch.partition)
               .Add(batch.done_snapshot)
               .Add(batch.read_snapshot)
               .Add(batch.cursor_xid)
               .Add(batch.cursor_id));
}

bool WaitForMessages(ClientCore& core, const std::string& topic,
                     const std::string& consumer,
                     std::chrono::milliseconds timeout) {
  constexpr const char* kOp = "Wait";
  ValidateTopicName(kOp, topic);
  ValidateConsumerName(kOp, consumer);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::optional<LogMark> mark;  // the last full probe's, when it found none
  std::set<std::string> writers_before;  // of the statement before it
  int quick_probes = 0;
  for (;;) {
    const bool found =
        WithTopic(core, kOp, topic, [&](pg::Session s, const TopicInfo& t) {
          if (mark && mark->topic_id != t.id) mark.reset();
          if (mark && quick_probes < kQuickProbesPerFull) {
            const LogMark now = ProbeLog(core, s, t);
            const bool moved =
                now.max_id > mark->max_id ||
                !std::includes(now.writers.begin(), now.writers.end(),
                               mark->writers.begin(), mark->writers.end());
            writers_before = now.writers;
            if (!moved) {
              ++quick_probes;
              return false;
            }
          } else if (!mark) {
            writers_before = ProbeLog(core, s, t).writers;
          }
          LogMark now;
          if (ProbePositions(core, s, t, consumer, now)) return true;
          now.writers.insert(writers_before.begin(), writers_before.end());
          writers_before = now.writers;
          now.topic_id = t.id;
          mark = std::move(now);
          quick_probes = 0;
          return false;
        });
    if (found) return true;
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) return false;
    std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(
        kWaitProbeInterval, deadline - now));
  }
}

}  // namespace compaction::detail
