#include "sweep/loop.hpp"

#include <chrono>
#include <optional>
#include <utility>

#include "compaction/errors.hpp"
#include "core.hpp"
#include "pg/sqlstate.hpp"
#include "sweep/cancel.hpp"
#include "sweep/pacing.hpp"
#include "topics.hpp"

namespace compaction::sweep {
namespace {

constexpr const char* kCancelledError = "cancelled";

// The batches of one claimed sweep, until the kind runs dry, the limit,
// a lost claim or a stop request. Statement errors propagate.
void RunBatches(BatchKind& kind, pg::Session s, std::int64_t topic_id,
                Claim& claim, const SweepOptions& o, std::stop_token stop,
                SweepResult& result) {
  // Each claim (and renewal) covers the batch and the batch_pause after it,
  // so pacing cannot make a live sweep's claim lapse between two renewals;
  // a longer duty_cycle pause renews the claim again before it starts.
  const std::chrono::milliseconds claim_for =
      ClaimCovering(o.claim_ttl, o.batch_pause);
  const StatementCanceller canceller(s.conn, stop);
  for (;;) {
    if (stop.stop_requested()) {
      result.cancelled = true;
      return;
    }
    // Every earlier batch came back full, so rows may remain.
    if (result.batches == o.max_batches) {
      result.stopped_at_limit = true;
      return;
    }
    const auto batch_started = std::chrono::steady_clock::now();
    std::chrono::milliseconds pause{0};
    {
      const StatementCanceller::Armed armed = canceller.Arm();
      // Claim::Take just set the first lease.
      if (result.batches > 0 && !claim.Renew(claim_for)) {
        result.lost_claim = true;
        return;
      }
      const Batch batch = kind.RunBatch(s, topic_id);
      result.deleted += batch.rows;
      ++result.batches;
      if (!batch.full) return;  // caught up
      // Pacing; none after the last batch the limit allows: the caller
      // gets its result (and the scheduler paces the continuation).
      if (result.batches == o.max_batches) continue;
      pause = PauseAfter(o, std::chrono::steady_clock::now() - batch_started);
      if (pause > o.batch_pause &&
          !claim.Renew(ClaimCovering(o.claim_ttl, pause))) {
        result.lost_claim = true;
        return;
      }
    }
    // Disarmed: the connection is idle, outside any transaction.
    if (pause.count() > 0 && !PauseUnlessStopped(stop, pause)) {
      result.cancelled = true;
      return;
    }
  }
}

// Records the outcome; a cancel request sent just as the last batch
// finished can land on this statement instead, and the server honours one
// request once.
void RecordOutcome(Claim& claim, const SweepResult& result, bool stopped) {
  const std::string outcome = result.cancelled ? kCancelledError : "";
  try {
    claim.Record(result.deleted, outcome);
  } catch (const DatabaseError& e) {
    if (!(stopped && e.sqlstate() == pg::kQueryCanceled)) throw;
    claim.Record(result.deleted, outcome);
  }
}

}  // namespace

SweepResult RunSweep(detail::ClientCore& core, BatchKind& kind,
                     const std::string& topic_name, const SweepOptions& o,
                     std::stop_token stop) {
  const char* op = kind.operation();
  pg::Pool::Lease lease = core.pool().Acquire(op);
  const pg::Session s = (*lease).session();
  SweepResult result;
  const std::int64_t topic_id =
      detail::ResolveTopic(core, s, op, topic_name).id;
  // Runs outside any transaction, so the state row is locked only for this
  // statement and a competing claimer never waits for our batches.
  std::optional<Claim> claim =
      Claim::Take(core, s, op, kind.ledger(), topic_id, topic_name,
                  o.owner.empty() ? DefaultOwner() : o.owner,
                  ClaimCovering(o.claim_ttl, o.batch_pause), result.claimed_by);
  if (!claim) {
    result.skipped = true;
    return result;
  }
  try {
    RunBatches(kind, s, topic_id, *claim, o, stop, result);
  } catch (const DatabaseError& e) {
    pg::RollbackQuietly(s);  // the batch's error is the news
    const bool stopped = stop.stop_requested();
    if (stopped) lease.Discard();
    if (!(stopped && e.sqlstate() == pg::kQueryCanceled)) {
      try {
        claim->Record(result.deleted, e.what());
      } catch (const Error&) {
      }
      throw;
    }
    result.cancelled = true;  // the batch in flight rolled back
  }
  // A cancel request can reach the backend after the statement it was
  // meant for; such a connection must not serve anyone else.
  const bool stopped = stop.stop_requested();
  if (stopped) lease.Discard();
  RecordOutcome(*claim, result, stopped);
  return result;
}

}  // namespace compaction::sweep
