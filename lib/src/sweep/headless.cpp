#include "sweep/headless.hpp"

#include "core.hpp"

namespace compaction::sweep {

// One batch, its own transaction. The cutoff is an InitPlan over the topic
// row, so it comes from the server clock and the current TTL, and it is a
// plain index condition: the pick walks the idle_since partial index and
// stops after batch_size rows it could lock, skipping keys a transaction
// holds. It starts after the cursor: the index entries of rows that earlier
// batches deleted stay until VACUUM, and walking over them again every
// batch made long sweeps quadratic. The picked rows are locked by this
// transaction, so their ctids stay put until the DELETE, which finds them by
// TID (a stale ctid would make the DELETE follow the update chain) and
// re-checks the expiry predicate on the row version it deletes.
Batch HeadlessBatches::RunBatch(pg::Session s, std::int64_t topic_id) {
  pg::ExecScript(s, kOperation,
                 "BEGIN; SET LOCAL statement_timeout = '" +
                     std::to_string(options_.statement_timeout.count()) +
                     "ms'");
  const std::string head = core_.HeadTable(topic_id);
  const std::string cutoff =
      "(SELECT pg_catalog.now() - headless_ttl_ms::float8 * "
      "interval '1 millisecond' FROM " +
      core_.schema() + ".topic WHERE id = $1)";
  pg::Params params;
  params.Add(topic_id).Add(options_.batch_size);
  std::string after;
  if (cursor_) {
    params.Add(cursor_->idle_since).Add(cursor_->message_key);
    after = " AND (idle_since, message_key) > ($3::timestamptz, $4)";
  }
  pg::Result r = pg::Exec(
      s, kOperation,
      "/* compaction:SweepHeadless */ WITH picked AS (SELECT ctid FROM " +
          head + " WHERE idle_since IS NOT NULL AND idle_since < " + cutoff +
          after +
          " ORDER BY idle_since, message_key LIMIT $2 FOR UPDATE SKIP LOCKED), "
          "gone AS (DELETE FROM " +
          head +
          " d WHERE d.ctid = ANY (ARRAY(SELECT ctid FROM picked)) "
          "AND d.head_id IS NULL AND d.updated_at < " +
          cutoff +
          " RETURNING d.idle_since, d.message_key) "
          "SELECT (SELECT pg_catalog.count(*) FROM gone), "
          "last.idle_since::text, "
          "last.message_key FROM (SELECT 1) one LEFT JOIN (SELECT * FROM gone "
          "ORDER BY 1 DESC, 2 DESC LIMIT 1) last ON true",
      params);
  const std::int64_t deleted = pg::Int64(r.get(), 0, 0);
  if (deleted > 0) {
    cursor_ = Cursor{std::string(pg::Text(r.get(), 0, 1)),
                     std::string(pg::Text(r.get(), 0, 2))};
  }
  pg::ExecScript(s, kOperation, "COMMIT");
  // A short batch means the sweep caught up.
  return Batch{deleted, deleted >= options_.batch_size};
}

}  // namespace compaction::sweep
