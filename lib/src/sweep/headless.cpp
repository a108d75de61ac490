#include "sweep/headless.hpp"

#include "core.hpp"

namespace compaction::sweep {

// One batch, its own transaction, through sweep_headless (sql/system_v1.sql,
// SECURITY DEFINER: the janitor role has no DELETE on head tables, and the
// function deletes only headless rows past the TTL). The cutoff is an
// InitPlan over the topic row, so it comes from the server clock and the
// current TTL, and it is a plain index condition: the pick walks the
// idle_since partial index and stops after batch_size rows it could lock,
// skipping keys a transaction holds. It starts after the cursor: the index
// entries of rows that earlier batches deleted stay until VACUUM, and
// walking over them again every batch made long sweeps quadratic. The
// picked rows are locked by this transaction, so their ctids stay put until
// the DELETE, which finds them by TID (a stale ctid would make the DELETE
// follow the update chain) and re-checks the expiry predicate on the row
// version it deletes.
Batch HeadlessBatches::RunBatch(pg::Session s, std::int64_t topic_id) {
  pg::ExecScript(s, kOperation,
                 "BEGIN; SET LOCAL statement_timeout = '" +
                     std::to_string(options_.statement_timeout.count()) +
                     "ms'");
  pg::Params params;
  params.Add(topic_id).Add(options_.batch_size);
  if (cursor_) {
    params.Add(cursor_->idle_since).Add(cursor_->message_key);
  } else {
    params.AddNull().AddNull();
  }
  pg::Result r = pg::Exec(
      s, kOperation,
      "/* compaction:SweepHeadless */ SELECT * FROM " + core_.schema() +
          ".sweep_headless($1::bigint, $2::bigint, $3::timestamptz, $4::text)",
      params);
  const std::int64_t deleted = pg::Int64(r, 0, 0);
  if (deleted > 0) {
    cursor_ =
        Cursor{std::string(pg::Text(r, 0, 1)), std::string(pg::Text(r, 0, 2))};
  }
  pg::ExecScript(s, kOperation, "COMMIT");
  // A short batch means the sweep caught up.
  return Batch{deleted, deleted >= options_.batch_size};
}

}  // namespace compaction::sweep
