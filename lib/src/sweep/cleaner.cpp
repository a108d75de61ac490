#include "sweep/cleaner.hpp"

#include "compaction/errors.hpp"
#include "core.hpp"

namespace compaction::sweep {
namespace {

// The largest bigint: a retention of kKeepForever.
constexpr const char* kForever = "9223372036854775807::bigint";

// The walks' statements are functions of the system baseline
// (sql/system_v1.sql: clean_tombstones, clean_messages,
// count_tombstoned_keys), SECURITY DEFINER: the janitor role cannot read
// payloads or delete from message and head tables itself, and the functions
// delete only what the rules allow. Each returns, after its counts, where
// the walk stopped and whether the batch was full: `stop` is the first id
// it must not pass (a message inside its retention, or one it could not
// lock), NULL when none; the frontier is the last id passed, never below
// the batch's start. Each records that frontier, the only value a pending
// position may take (check_cleaner_positions).

}  // namespace

void CleanerBatches::Cursor::Advance(std::int64_t frontier,
                                     const std::string& xmax) {
  at = frontier;
  // Every transaction that could still commit a message at or below a final
  // pending position had ended when this pass started, so what the pass
  // walked below it is done for good: the position follows the walk. Not
  // only once it reaches the pending position: rows committed late into
  // that range can make it longer than a pass walks (max_batches), and a
  // pass that could move only all the way would never move again.
  if (pending && pending_final) {
    if (frontier >= *pending) {
      position = *pending;
      pending.reset();
      pending_final = false;
    } else if (frontier > position) {
      position = frontier;
    }
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
  if (r.rows() != 1) {
    // The claim just read this row; only a Destroy can have removed it.
    throw TopicNotFound(kOperation, "id " + std::to_string(topic_id));
  }
  const pg::Result& row = r;
  auto load = [&](Cursor& c, int col, bool forever) {
    c.position = pg::Int64(row, 0, col);
    c.pending = pg::OptInt64(row, 0, col + 1);
    if (c.pending) c.pending_xmax = pg::Text(row, 0, col + 2);
    c.pending_final = pg::Bool(row, 0, col + 3);
    c.at = c.position;
    c.start = c.position;
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
  pg::Result r = pg::Exec(
      s, kOperation,
      "/* compaction:CompactLog:tombstones */ SELECT * FROM " + core_.schema() +
          ".clean_tombstones($1::bigint, $2::bigint, $3::bigint)",
      pg::Params()
          .Add(topic_id)
          .Add(tombstones_.at)
          .Add(static_cast<std::int64_t>(options_.batch_size)));
  Step step;
  step.deleted = pg::Int64(r, 0, 0);
  step.expired = pg::Int64(r, 0, 1);
  step.frontier = pg::Int64(r, 0, 2);
  step.full = pg::Bool(r, 0, 3);
  step.xmax = pg::Text(r, 0, 4);
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
  pg::Result r = pg::Exec(
      s, kOperation,
      "/* compaction:CompactLog:messages */ SELECT p.deleted, 0::bigint, "
      "p.frontier, p.full_batch, p.snapshot_xmax, p.next_created_at FROM " +
          core_.schema() +
          ".clean_messages($1::bigint, $2::bigint, $3::bigint) p",
      pg::Params()
          .Add(topic_id)
          .Add(messages_.at)
          .Add(static_cast<std::int64_t>(options_.batch_size)));
  Step step;
  step.deleted = pg::Int64(r, 0, 0);
  step.frontier = pg::Int64(r, 0, 2);
  step.full = pg::Bool(r, 0, 3);
  step.xmax = pg::Text(r, 0, 4);
  if (!pg::IsNull(r, 0, 5)) step.next_created_at = pg::Text(r, 0, 5);
  return step;
}

// Keys whose head is a tombstone once the tombstone walk is over: the
// tombstones above its final position that are heads (below it every
// tombstone head has expired), counted up to a bound.
void CleanerBatches::CountTombstonedKeys(pg::Session s, std::int64_t topic_id) {
  pg::Result r =
      pg::Exec(s, kOperation,
               "SELECT " + core_.schema() +
                   ".count_tombstoned_keys($1::bigint, $2::bigint, $3::bigint)",
               pg::Params()
                   .Add(topic_id)
                   .Add(tombstones_.position)
                   .Add(kMaxTombstonedKeysCounted));
  tombstoned_keys_ = pg::Int64(r, 0, 0);
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
