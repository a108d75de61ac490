#include "sweep/cleaner.hpp"

#include "compaction/errors.hpp"
#include "core.hpp"

namespace compaction::sweep {
namespace {

// The largest bigint: a retention of kKeepForever.
constexpr const char* kForever = "9223372036854775807::bigint";

// The cutoff of retention column `column` of topic $1, from the server's
// clock: messages created before it are out of their retention.
// kKeepForever is -infinity (nothing is older).
std::string Cutoff(const detail::ClientCore& core, const char* column) {
  return std::string("(SELECT CASE WHEN t.") + column + " = " + kForever +
         " THEN '-infinity'::timestamptz ELSE pg_catalog.now() - t." + column +
         "::float8 * interval '1 millisecond' END FROM " + core.schema() +
         ".topic t WHERE t.id = $1)";
}

// "Is message `m` its key's head" as the statement's snapshot sees it.
std::string IsHead(const detail::ClientCore& core, std::int64_t topic_id,
                   const std::string& m) {
  return "EXISTS (SELECT 1 FROM " + core.HeadTable(topic_id) +
         " h WHERE h.message_key = " + m + ".message_key AND h.head_id = " + m +
         ".id)";
}

// Guarantee 4: tombstones, and messages without a key or without
// compaction, wait until every active consumer of the topic (last Poll
// within consumer_inactive_after) has consumed them. Keyed compacted
// messages that are not their key's head go all the same: the consumer
// reads the key's newer version. `waiting` is the positions of the active
// consumers, a handful of rows per partition.
std::string Waiting(const detail::ClientCore& core) {
  return "waiting AS MATERIALIZED (SELECT p.partition, p.done_snapshot, "
         "p.read_snapshot, p.cursor_xid, p.cursor_id FROM " +
         core.schema() +
         ".consumer_position p WHERE p.topic_id = $1 AND p.consumer IN "
         "(SELECT q.consumer FROM " +
         core.schema() + ".consumer_position q JOIN " + core.schema() +
         ".topic t ON t.id = q.topic_id WHERE q.topic_id = $1 GROUP BY "
         "q.consumer, t.consumer_inactive_after_ms HAVING "
         "pg_catalog.max(q.last_poll_at) > pg_catalog.now() - "
         "t.consumer_inactive_after_ms::float8 * interval '1 millisecond')), ";
}

// "Some active consumer has not consumed message `m`": a position has
// consumed it when its writer is visible in the done snapshot, or in the
// window being walked at or before the cursor (lib/src/consume_read.cpp).
std::string Held(const std::string& m) {
  return "EXISTS (SELECT 1 FROM waiting w WHERE w.partition = " + m +
         ".partition AND NOT pg_catalog.pg_visible_in_snapshot(" + m +
         ".xid, w.done_snapshot) AND NOT coalesce("
         "pg_catalog.pg_visible_in_snapshot(" +
         m + ".xid, w.read_snapshot) AND (" + m + ".xid, " + m +
         ".id) <= (w.cursor_xid, w.cursor_id), false))";
}

// The columns every step returns after its own: where the walk stopped and
// whether the batch was full. `stop` is the first id it must not pass (a
// message inside its retention, or one it could not lock), NULL when none.
// The frontier is the last id passed; never below the batch's start ($2).
constexpr const char* kFrontierColumns =
    "CASE WHEN (SELECT id FROM stop) IS NULL "
    "THEN coalesce((SELECT max(id) FROM scan), $2::bigint) "
    "ELSE greatest($2::bigint, (SELECT id FROM stop) - 1) END, "
    "(SELECT pg_catalog.count(*) FROM scan) = $3::bigint "
    "AND (SELECT id FROM stop) IS NULL, "
    "pg_catalog.pg_snapshot_xmax(pg_catalog.pg_current_snapshot())::text";

}  // namespace

void CleanerBatches::Cursor::Advance(std::int64_t frontier,
                                     const std::string& xmax) {
  at = frontier;
  // This pass walked all of (position, pending] after every transaction
  // that could still commit a message in it had ended: it is done for good.
  if (pending && pending_final && frontier >= *pending) {
    position = *pending;
    pending.reset();
    pending_final = false;
  }
  // What this pass reached turns final after the next pass's walk, unless
  // an earlier pass's pending position still waits for its transactions.
  if ((!pending || pending_ours) && frontier > position) {
    pending = frontier;
    pending_xmax = xmax;
    pending_ours = true;
  }
}

Batch CleanerBatches::RunBatch(pg::Session s, std::int64_t topic_id) {
  // No bitmap scans: the older-versions lookup of a key would re-read every
  // dead index entry of the key per batch, quadratic in its history (bench
  // run H-log: 2.8x the delete rate with plain index scans).
  pg::ExecScript(s, kOperation,
                 "BEGIN; SET LOCAL statement_timeout = '" +
                     std::to_string(options_.statement_timeout.count()) +
                     "ms'; SET LOCAL enable_bitmapscan = off");
  if (!loaded_) Load(s, topic_id);
  Step step;
  if (!tombstones_.done) {
    step = TombstoneStep(s, topic_id);
    tombstones_.Advance(step.frontier, step.xmax);
    tombstones_.done = !step.full;
    if (tombstones_.done) CountTombstonedKeys(s, topic_id);
  } else if (!messages_.done) {
    step = MessageStep(s, topic_id);
    messages_.Advance(step.frontier, step.xmax);
    messages_.done = !step.full;
    next_created_at_ = step.next_created_at;
  }
  Save(s, topic_id, step.expired);
  pg::ExecScript(s, kOperation, "COMMIT");
  tombstones_expired_ += step.expired;
  return Batch{step.deleted, !(tombstones_.done && messages_.done)};
}

// In the first batch's transaction: the stored positions, and whether each
// pending one may turn final (every xid below its xmax has ended: the
// oldest running xid of this snapshot is not below it).
void CleanerBatches::Load(pg::Session s, std::int64_t topic_id) {
  const std::string xmin =
      "pg_catalog.pg_snapshot_xmin(pg_catalog.pg_current_snapshot())";
  pg::Result r = pg::Exec(
      s, kOperation,
      "SELECT c.position, c.pending_position, c.pending_xmax::text, "
      "coalesce(c.pending_xmax <= " +
          xmin +
          ", false), "
          "c.tombstone_position, c.tombstone_pending_position, "
          "c.tombstone_pending_xmax::text, "
          "coalesce(c.tombstone_pending_xmax <= " +
          xmin +
          ", false), "
          "t.retention_ms = " +
          kForever + ", t.tombstone_retention_ms = " + kForever +
          ", c.tombstoned_keys, c.next_created_at::text FROM " +
          core_.schema() + ".log_cleaner_state c JOIN " + core_.schema() +
          ".topic t ON t.id = c.topic_id WHERE c.topic_id = $1",
      pg::Params().Add(topic_id));
  if (PQntuples(r.get()) != 1) {
    // The claim just read this row; only a Destroy can have removed it.
    throw TopicNotFound(kOperation, "id " + std::to_string(topic_id));
  }
  const PGresult* row = r.get();
  auto load = [&](Cursor& c, int col, bool forever) {
    c.position = pg::Int64(row, 0, col);
    c.pending = pg::OptInt64(row, 0, col + 1);
    if (c.pending) c.pending_xmax = pg::Text(row, 0, col + 2);
    c.pending_final = pg::Bool(row, 0, col + 3);
    c.at = c.position;
    c.done = forever;
  };
  load(messages_, 0, pg::Bool(row, 0, 8));
  load(tombstones_, 4, pg::Bool(row, 0, 9));
  tombstoned_keys_ = pg::Int64(row, 0, 10);
  if (!pg::IsNull(row, 0, 11)) next_created_at_ = pg::Text(row, 0, 11);
  if (messages_.done) next_created_at_.reset();  // nothing is ever due
  loaded_ = true;
}

// Expires the tombstone heads past tombstone_retention among the next
// batch_size tombstones: locks each key's row (SKIP LOCKED: a key a
// transaction holds is left for a later pass, and the walk stops there),
// re-checks under the lock that the tombstone is still the head (a
// producer may have revived the key), turns the row headless and deletes
// the tombstone. Tombstones that are no longer heads are passed over: they
// are ordinary superseded messages, the message walk's by retention.
CleanerBatches::Step CleanerBatches::TombstoneStep(pg::Session s,
                                                   std::int64_t topic_id) {
  const std::string head = core_.HeadTable(topic_id);
  const std::string message = core_.MessageTable(topic_id);
  pg::Result r = pg::Exec(
      s, kOperation,
      "/* compaction:CompactLog:tombstones */ WITH " + Waiting(core_) +
          "scan AS MATERIALIZED (SELECT m.id, m.message_key, m.created_at < " +
          Cutoff(core_, "tombstone_retention_ms") + " AS old, " + Held("m") +
          " AS held FROM " + message +
          " m WHERE m.payload IS NULL AND m.id > $2::bigint "
          "ORDER BY m.id LIMIT $3::bigint), "
          // A tombstone a consumer still has to see stops the walk as one
          // inside its retention does.
          "young AS (SELECT pg_catalog.min(id) AS id FROM scan "
          "WHERE NOT old OR held), "
          "due AS MATERIALIZED (SELECT s.id, s.message_key FROM scan s "
          "WHERE s.old AND s.id < coalesce((SELECT id FROM young), " +
          kForever + ") AND " + IsHead(core_, topic_id, "s") +
          "), "
          "locked AS MATERIALIZED (SELECT h.message_key, h.head_id FROM " +
          head +
          " h WHERE h.message_key = ANY (ARRAY(SELECT message_key FROM due)) "
          "AND h.head_id = ANY (ARRAY(SELECT id FROM due)) "
          "FOR UPDATE OF h SKIP LOCKED), "
          "expired AS (UPDATE " +
          head +
          " u SET head_id = NULL, schema_version = NULL, "
          "compaction_rank = NULL, updated_at = pg_catalog.now(), "
          "idle_since = pg_catalog.now() FROM locked l "
          "WHERE u.message_key = l.message_key AND u.head_id = l.head_id "
          "RETURNING l.head_id AS id), "
          "gone AS (DELETE FROM " +
          message +
          " d WHERE d.id = ANY (ARRAY(SELECT id FROM expired)) "
          "RETURNING d.id), "
          "stop AS (SELECT least((SELECT id FROM young), "
          "(SELECT pg_catalog.min(d.id) FROM due d WHERE NOT EXISTS "
          "(SELECT 1 FROM locked l WHERE l.head_id = d.id))) AS id) "
          "SELECT (SELECT pg_catalog.count(*) FROM gone), "
          "(SELECT pg_catalog.count(*) FROM expired), " +
          kFrontierColumns,
      pg::Params()
          .Add(topic_id)
          .Add(tombstones_.at)
          .Add(static_cast<std::int64_t>(options_.batch_size)));
  Step step;
  step.deleted = pg::Int64(r.get(), 0, 0);
  step.expired = pg::Int64(r.get(), 0, 1);
  step.frontier = pg::Int64(r.get(), 0, 2);
  step.full = pg::Bool(r.get(), 0, 3);
  step.xmax = pg::Text(r.get(), 0, 4);
  return step;
}

// Deletes, among the next batch_size messages, those out of retention that
// are not their key's head, and for each key seen the key's older versions
// below the batch that are out of retention and not its head: a head the
// walk passed earlier and that a newer message of this batch superseded.
// Every deleted row is locked first, SKIP LOCKED: the walk stops before a
// row it could not lock (and does not move at all when that row lies below
// the batch), so a later pass retries it.
CleanerBatches::Step CleanerBatches::MessageStep(pg::Session s,
                                                 std::int64_t topic_id) {
  const std::string message = core_.MessageTable(topic_id);
  const std::string cutoff = Cutoff(core_, "retention_ms");
  pg::Result r = pg::Exec(
      s, kOperation,
      "/* compaction:CompactLog:messages */ WITH " + Waiting(core_) +
          "scan AS MATERIALIZED (SELECT m.id, m.message_key, m.created_at, "
          "m.created_at < " +
          cutoff +
          " AS old, (m.message_key IS NULL OR m.compaction_rank IS "
          "NULL) AND " +
          Held("m") + " AS held FROM " + message +
          " m WHERE m.id > $2::bigint ORDER BY m.id LIMIT $3::bigint), "
          // A message retention would remove but a consumer still has to
          // see stops the walk as one inside its retention does.
          "young AS (SELECT pg_catalog.min(id) AS id FROM scan "
          "WHERE NOT old OR held), "
          "considered AS MATERIALIZED (SELECT s.id, s.message_key FROM scan s "
          "WHERE s.id < coalesce((SELECT id FROM young), " +
          kForever +
          ")), "
          "cand AS MATERIALIZED (SELECT c.id FROM considered c WHERE NOT " +
          IsHead(core_, topic_id, "c") +
          " UNION SELECT o.id FROM (SELECT DISTINCT message_key FROM "
          "considered WHERE message_key IS NOT NULL) k CROSS JOIN LATERAL "
          "(SELECT o.id FROM " +
          message +
          " o WHERE o.message_key = k.message_key AND o.id <= $2::bigint "
          "AND o.created_at < " +
          cutoff + " AND NOT " + IsHead(core_, topic_id, "o") +
          " AND (o.compaction_rank IS NOT NULL OR NOT " + Held("o") + ")" +
          ") o), "
          "locked AS MATERIALIZED (SELECT m.id FROM " +
          message +
          " m WHERE m.id = ANY (ARRAY(SELECT id FROM cand)) "
          "FOR UPDATE SKIP LOCKED), "
          "gone AS (DELETE FROM " +
          message +
          " d WHERE d.id = ANY (ARRAY(SELECT id FROM locked)) "
          "RETURNING d.id), "
          "stop AS (SELECT least((SELECT id FROM young), "
          "(SELECT pg_catalog.min(c.id) FROM cand c WHERE NOT EXISTS "
          "(SELECT 1 FROM locked l WHERE l.id = c.id))) AS id) "
          "SELECT (SELECT pg_catalog.count(*) FROM gone), 0::bigint, " +
          kFrontierColumns +
          ", (SELECT n.created_at::text FROM scan n WHERE n.id >= "
          "(SELECT id FROM stop) ORDER BY n.id LIMIT 1)",
      pg::Params()
          .Add(topic_id)
          .Add(messages_.at)
          .Add(static_cast<std::int64_t>(options_.batch_size)));
  Step step;
  step.deleted = pg::Int64(r.get(), 0, 0);
  step.frontier = pg::Int64(r.get(), 0, 2);
  step.full = pg::Bool(r.get(), 0, 3);
  step.xmax = pg::Text(r.get(), 0, 4);
  if (!pg::IsNull(r.get(), 0, 5))
    step.next_created_at = pg::Text(r.get(), 0, 5);
  return step;
}

// Keys whose head is a tombstone once the tombstone walk is over: the
// tombstones above its final position that are heads (below it every
// tombstone head has expired), counted up to a bound.
void CleanerBatches::CountTombstonedKeys(pg::Session s, std::int64_t topic_id) {
  pg::Result r = pg::Exec(
      s, kOperation,
      "SELECT pg_catalog.count(*) FROM (SELECT FROM " +
          core_.MessageTable(topic_id) +
          " m WHERE m.payload IS NULL AND m.id > $1::bigint AND " +
          IsHead(core_, topic_id, "m") + " LIMIT $2::bigint) k",
      pg::Params().Add(tombstones_.position).Add(kMaxTombstonedKeysCounted));
  tombstoned_keys_ = pg::Int64(r.get(), 0, 0);
}

// Stores the positions and counters in the batch's own transaction, so
// they commit with what the batch deleted.
void CleanerBatches::Save(pg::Session s, std::int64_t topic_id,
                          std::int64_t expired) {
  pg::Params params;
  params.Add(topic_id)
      .Add(messages_.position)
      .Add(messages_.pending)
      .Add(messages_.pending ? std::optional(messages_.pending_xmax)
                             : std::nullopt)
      .Add(tombstones_.position)
      .Add(tombstones_.pending)
      .Add(tombstones_.pending ? std::optional(tombstones_.pending_xmax)
                               : std::nullopt)
      .Add(expired)
      .Add(next_created_at_)
      .Add(tombstoned_keys_)
      .Add(std::string(first_save_ ? "t" : "f"));
  pg::Exec(s, kOperation,
           "UPDATE " + core_.schema() +
               ".log_cleaner_state SET position = $2::bigint, "
               "pending_position = $3::bigint, pending_xmax = $4::xid8, "
               "tombstone_position = $5::bigint, "
               "tombstone_pending_position = $6::bigint, "
               "tombstone_pending_xmax = $7::xid8, "
               "last_tombstones_expired = CASE WHEN $11::boolean THEN "
               "$8::bigint ELSE last_tombstones_expired + $8::bigint END, "
               "total_tombstones_expired = total_tombstones_expired + "
               "$8::bigint, scanned_at = pg_catalog.now(), "
               "next_created_at = $9::timestamptz, "
               "tombstoned_keys = $10::bigint WHERE topic_id = $1::bigint",
           params);
  first_save_ = false;
}

}  // namespace compaction::sweep
