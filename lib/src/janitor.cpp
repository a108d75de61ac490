// The headless-row janitor: claim, bounded batches, bookkeeping.
#include "compaction/janitor.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>

#include "compaction/client.hpp"
#include "core.hpp"
#include "pg/sqlstate.hpp"
#include "topics.hpp"
#include "validate.hpp"

namespace compaction {

// What Cancel() needs to reach the sweep in flight.
struct Janitor::InFlight {
  // Held for a whole sweep: `cancel` and `cancelled` describe one sweep.
  std::mutex sweep_mutex;
  std::mutex mutex;              // guards `cancel`, `pausing`, `wake`
  PGcancel* cancel = nullptr;    // set while a sweep holds a connection
  bool pausing = false;          // in batch_pause: no statement to cancel
  std::condition_variable wake;  // Cancel() ends a batch_pause
  // Set under `mutex`, so a pause that checks it under the lock cannot miss
  // the notification.
  std::atomic<bool> cancelled{false};

  // Waits out batch_pause unless Cancel() comes first; false when it did.
  // A condition variable, not a sleep: a shutdown must not wait it out.
  bool Pause(std::chrono::milliseconds pause) {
    std::unique_lock lock(mutex);
    pausing = true;
    const bool woken =
        wake.wait_for(lock, pause, [this] { return cancelled.load(); });
    pausing = false;
    return !woken;
  }
};

namespace {

constexpr const char* kOp = "SweepHeadless";
constexpr const char* kCancelledError = "cancelled";
// Pacing beyond this has no use (a batch takes milliseconds) and would keep
// a dead sweep's claim, which covers the pause, needlessly long.
constexpr std::chrono::milliseconds kMaxBatchPause = std::chrono::minutes(1);

std::string DefaultOwner() {
  static std::atomic<int> next{0};
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  return std::string(host) + ":" + std::to_string(getpid()) + ":" +
         std::to_string(next++);
}

void ValidateSweep(const std::string& topic, const SweepOptions& o) {
  detail::ValidateTopicName(kOp, topic);
  if (o.batch_size <= 0) {
    throw InvalidArgument(kOp, "batch_size must be positive, got " +
                                   std::to_string(o.batch_size));
  }
  if (o.max_batches <= 0) {
    throw InvalidArgument(kOp, "max_batches must be positive, got " +
                                   std::to_string(o.max_batches));
  }
  detail::ValidateServerTimeout(kOp, "statement_timeout", o.statement_timeout);
  detail::ValidateTtl(kOp, "claim_ttl", o.claim_ttl);
  if (o.batch_pause.count() < 0 || o.batch_pause > kMaxBatchPause) {
    throw InvalidArgument(kOp, "batch_pause must be in 0.." +
                                   std::to_string(kMaxBatchPause.count()) +
                                   " ms, got " +
                                   std::to_string(o.batch_pause.count()));
  }
  if (!(o.duty_cycle > 0.0 && o.duty_cycle <= 1.0)) {
    throw InvalidArgument(kOp, "duty_cycle must be in (0, 1], got " +
                                   std::to_string(o.duty_cycle));
  }
  if (o.batch_pause.count() > 0 && o.batch_pause >= o.claim_ttl) {
    throw InvalidArgument(
        kOp, "batch_pause (" + std::to_string(o.batch_pause.count()) +
                 " ms) must be shorter than claim_ttl (" +
                 std::to_string(o.claim_ttl.count()) + " ms)");
  }
}

std::int64_t Millis(std::chrono::milliseconds d) {
  return static_cast<std::int64_t>(d.count());
}

// claim_ttl + extra, saturating: claim_ttl itself has no upper bound.
std::chrono::milliseconds ClaimCovering(std::chrono::milliseconds claim_ttl,
                                        std::chrono::milliseconds extra) {
  return claim_ttl > std::chrono::milliseconds::max() - extra
             ? claim_ttl
             : claim_ttl + extra;
}

// The pause after a full batch that took `busy`: batch_pause, or longer
// when duty_cycle limits the sweep's share of time spent in batches.
std::chrono::milliseconds PauseAfter(const SweepOptions& o,
                                     std::chrono::steady_clock::duration busy) {
  if (o.duty_cycle >= 1.0) return o.batch_pause;
  const double idle_ms =
      std::chrono::duration<double, std::milli>(busy).count() *
      (1.0 - o.duty_cycle) / o.duty_cycle;
  const double cap_ms =
      static_cast<double>(std::min(kMaxBatchPause, o.claim_ttl).count());
  const std::chrono::milliseconds idle(
      std::llround(std::min(idle_ms, cap_ms)));
  return std::max(idle, o.batch_pause);
}

// What a skipped sweep reports as the holder when no claim is live but a
// transaction holds the topic's janitor_state row.
constexpr const char* kStateRowLocked =
    "(another transaction holds the janitor_state row)";

// "N milliseconds", for a $n::interval parameter (exact types: see
// IntervalText's uses; no bigint * interval, which resolves through an
// implicit cast that any role could shadow with an exact operator).
std::string IntervalText(std::chrono::milliseconds d) {
  return std::to_string(d.count()) + " milliseconds";
}

// An UPDATE of the topic's janitor_state row ($1 = topic id) that never
// waits: a row another transaction holds locked (any role that can read the
// table can lock it) is skipped, so the sweep reports itself skipped, a
// claim renewal counts as lost and a record is dropped (the claim then
// lapses by its TTL) instead of hanging until a timeout.
std::string StateUpdate(const detail::ClientCore& core, const std::string& set,
                        const std::string& condition) {
  const std::string table = core.schema() + ".janitor_state";
  return "WITH target AS (SELECT topic_id FROM " + table +
         " WHERE topic_id = $1 FOR UPDATE SKIP LOCKED) UPDATE " + table +
         " AS j SET " + set + " FROM target WHERE j.topic_id = target.topic_id"
         " AND " + condition + " RETURNING j.topic_id";
}

// Takes the topic's claim unless another owner holds a live one. Returns
// the topic id, or nullopt with `holder` set when skipped. Runs outside any
// transaction, so the janitor_state row is locked only for this statement
// and a competing claimer never waits for our batches.
std::optional<std::int64_t> Claim(detail::ClientCore& core, pg::Session s,
                                  const std::string& topic,
                                  const std::string& owner,
                                  std::chrono::milliseconds ttl,
                                  std::string& holder) {
  const TopicInfo info = detail::ResolveTopic(core, s, kOp, topic);
  pg::Result r = pg::Exec(
      s, kOp,
      StateUpdate(core,
                  "claimed_by = $2, claimed_until = pg_catalog.now() + "
                  "$3::interval, last_sweep_started_at = pg_catalog.now()",
                  "(j.claimed_until IS NULL OR j.claimed_until < "
                  "pg_catalog.now() OR j.claimed_by = $2::text)"),
      pg::Params().Add(info.id).Add(owner).Add(IntervalText(ttl)));
  if (PQntuples(r.get()) == 1) return info.id;
  pg::Result h = pg::Exec(
      s, kOp,
      "SELECT CASE WHEN claimed_until > pg_catalog.now() THEN claimed_by END "
      "FROM " + core.schema() + ".janitor_state WHERE topic_id = $1",
      pg::Params().Add(info.id));
  // The state row goes with the topic (ON DELETE CASCADE): no row means the
  // topic was destroyed after we resolved it.
  if (PQntuples(h.get()) == 0) throw TopicNotFound(kOp, topic);
  holder = pg::IsNull(h.get(), 0, 0)
               ? std::string(kStateRowLocked)
               : std::string(pg::Text(h.get(), 0, 0));
  return std::nullopt;
}

// Extends our claim before a batch; false when another owner took the
// topic over after our claim lapsed (a batch stalled past claim_ttl). Like
// Claim, a statement of its own so the state row is never locked for the
// length of a batch.
bool RenewClaim(detail::ClientCore& core, pg::Session s, std::int64_t topic_id,
                const std::string& owner, std::chrono::milliseconds ttl) {
  pg::Result r = pg::Exec(
      s, kOp,
      StateUpdate(core, "claimed_until = pg_catalog.now() + $3::interval",
                  "j.claimed_by = $2::text"),
      pg::Params().Add(topic_id).Add(owner).Add(IntervalText(ttl)));
  return PQntuples(r.get()) == 1;
}

// Where the previous batch of this sweep ended: the greatest deleted
// (idle_since, message_key), idle_since in the server's text form.
struct SweepCursor {
  std::string idle_since;
  std::string message_key;
};

// One batch, its own transaction. The cutoff is an InitPlan over the topic
// row, so it comes from the server clock and the current TTL, and it is a
// plain index condition: the pick walks the idle_since partial index and
// stops after batch_size rows it could lock, skipping keys a transaction
// holds. It starts after `cursor`: the index entries of rows that earlier
// batches deleted stay until VACUUM, and walking over them again every
// batch made long sweeps quadratic. The picked rows are locked by this
// transaction, so their ctids stay put until the DELETE, which finds them by
// TID (a stale ctid would make the DELETE follow the update chain) and
// re-checks the seed's predicate on the row version it deletes.
std::int64_t RunBatch(detail::ClientCore& core, pg::Session s,
                      std::int64_t topic_id, const SweepOptions& o,
                      std::optional<SweepCursor>& cursor) {
  pg::ExecScript(s.conn, kOp,
                 "BEGIN; SET LOCAL statement_timeout = '" +
                     std::to_string(Millis(o.statement_timeout)) + "ms'");
  const std::string head = core.HeadTable(topic_id);
  const std::string cutoff =
      "(SELECT pg_catalog.now() - headless_ttl_ms::float8 * "
      "interval '1 millisecond' FROM " +
      core.schema() + ".topic WHERE id = $1)";
  pg::Params params;
  params.Add(topic_id).Add(o.batch_size);
  std::string after;
  if (cursor) {
    params.Add(cursor->idle_since).Add(cursor->message_key);
    after = " AND (idle_since, message_key) > ($3::timestamptz, $4)";
  }
  pg::Result r = pg::Exec(
      s, kOp,
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
          "SELECT (SELECT pg_catalog.count(*) FROM gone), last.idle_since::text, "
          "last.message_key FROM (SELECT 1) one LEFT JOIN (SELECT * FROM gone "
          "ORDER BY 1 DESC, 2 DESC LIMIT 1) last ON true",
      params);
  const std::int64_t deleted = pg::Int64(r.get(), 0, 0);
  if (deleted > 0) {
    cursor = SweepCursor{std::string(pg::Text(r.get(), 0, 1)),
                         std::string(pg::Text(r.get(), 0, 2))};
  }
  pg::ExecScript(s.conn, kOp, "COMMIT");
  return deleted;
}

// After a failed batch; a broken connection is the pool's to discard, and
// the original error is the news.
void RollbackQuietly(PGconn* conn) {
  if (PQtransactionStatus(conn) == PQTRANS_IDLE) return;
  try {
    pg::ExecScript(conn, kOp, "ROLLBACK");
  } catch (const Error&) {
  }
}

// Ends the sweep in janitor_state and releases the claim. `error` empty
// marks a success; only the owner's own claim is touched, so a sweep that
// lost its claim leaves the new owner's bookkeeping alone.
void Record(detail::ClientCore& core, pg::Session s, std::int64_t topic_id,
            const std::string& owner, std::int64_t deleted,
            const std::string& error) {
  pg::Exec(s, kOp,
           StateUpdate(core,
                       "claimed_by = NULL, claimed_until = NULL, "
                       "last_sweep_finished_at = pg_catalog.now(), "
                       "last_success_at = CASE WHEN $4::text = '' THEN "
                       "pg_catalog.now() ELSE j.last_success_at END, "
                       "last_deleted_rows = $3::bigint, "
                       "total_deleted_rows = j.total_deleted_rows + $3::bigint, "
                       "last_error = NULLIF($4::text, '')",
                       "j.claimed_by = $2::text"),
           pg::Params().Add(topic_id).Add(owner).Add(deleted).Add(error));
}

}  // namespace

Janitor::Janitor(Client& client)
    : core_(client.core()), in_flight_(std::make_shared<InFlight>()) {}

Janitor::~Janitor() = default;

void Janitor::Cancel() {
  std::lock_guard lock(in_flight_->mutex);
  in_flight_->cancelled = true;
  // In a pause the connection is idle: the server would ignore the request,
  // or worse, a late one could hit the sweep's closing bookkeeping.
  if (in_flight_->cancel != nullptr && !in_flight_->pausing) {
    char error[256];
    PQcancel(in_flight_->cancel, error, sizeof error);
  }
  in_flight_->wake.notify_all();
}

SweepResult Janitor::SweepHeadless(const std::string& topic_name,
                                   const SweepOptions& options) {
  ValidateSweep(topic_name, options);
  InFlight& flight = *in_flight_;
  std::lock_guard sweep_lock(flight.sweep_mutex);
  // Reset first: a Cancel() from here on, even during the claim, stops this
  // sweep; one from before it belonged to an earlier sweep.
  flight.cancelled = false;
  detail::ClientCore& core = *core_;
  const std::string owner =
      options.owner.empty() ? DefaultOwner() : options.owner;
  // Each claim (and renewal) covers the batch and the batch_pause after it,
  // so pacing cannot make a live sweep's claim lapse between two renewals;
  // a longer duty_cycle pause renews the claim again before it starts.
  const std::chrono::milliseconds claim_for =
      ClaimCovering(options.claim_ttl, options.batch_pause);
  pg::Pool::Lease lease = core.pool().Acquire(kOp);
  const pg::Session s = (*lease).session();
  SweepResult result;
  const std::optional<std::int64_t> topic_id =
      Claim(core, s, topic_name, owner, claim_for, result.claimed_by);
  if (!topic_id) {
    result.skipped = true;
    return result;
  }
  {
    std::lock_guard lock(flight.mutex);
    flight.cancel = PQgetCancel(s.conn);
  }
  struct ClearCancel {
    InFlight& f;
    ~ClearCancel() {
      std::lock_guard lock(f.mutex);
      PQfreeCancel(f.cancel);
      f.cancel = nullptr;
    }
  } clear{flight};
  std::optional<SweepCursor> cursor;  // none: start at the oldest row
  try {
    for (;;) {
      if (flight.cancelled) {
        result.cancelled = true;
        break;
      }
      // Every earlier batch came back full, so rows may remain.
      if (result.batches == options.max_batches) {
        result.stopped_at_limit = true;
        break;
      }
      const auto batch_started = std::chrono::steady_clock::now();
      // Claim() just set the first lease.
      if (result.batches > 0 &&
          !RenewClaim(core, s, *topic_id, owner, claim_for)) {
        result.lost_claim = true;
        break;
      }
      const std::int64_t deleted =
          RunBatch(core, s, *topic_id, options, cursor);
      result.deleted += deleted;
      ++result.batches;
      if (deleted < options.batch_size) break;  // short batch: caught up
      // Pacing; none after the last batch the limit allows: the caller
      // gets its result (and the scheduler paces the continuation).
      if (result.batches == options.max_batches) continue;
      const std::chrono::milliseconds pause =
          PauseAfter(options, std::chrono::steady_clock::now() - batch_started);
      if (pause > options.batch_pause &&
          !RenewClaim(core, s, *topic_id, owner,
                      ClaimCovering(options.claim_ttl, pause))) {
        result.lost_claim = true;
        break;
      }
      if (pause.count() > 0 && !flight.Pause(pause)) {
        result.cancelled = true;
        break;
      }
    }
  } catch (const DatabaseError& e) {
    RollbackQuietly(s.conn);
    if (flight.cancelled) lease.Discard();
    if (!(flight.cancelled && e.sqlstate() == pg::kQueryCanceled)) {
      try {
        Record(core, s, *topic_id, owner, result.deleted, e.what());
      } catch (const Error&) {
      }
      throw;
    }
    result.cancelled = true;  // the batch in flight rolled back
  }
  // A cancel request can reach the backend after the statement it was
  // meant for; such a connection must not serve anyone else.
  if (flight.cancelled) lease.Discard();
  const std::string outcome = result.cancelled ? kCancelledError : "";
  try {
    Record(core, s, *topic_id, owner, result.deleted, outcome);
  } catch (const DatabaseError& e) {
    // A cancel request sent just as the last batch finished can land on
    // this statement instead; the server honours one request once.
    if (!(flight.cancelled && e.sqlstate() == pg::kQueryCanceled)) throw;
    Record(core, s, *topic_id, owner, result.deleted, outcome);
  }
  return result;
}

}  // namespace compaction
