// The headless-row janitor: claim, bounded batches, bookkeeping.
#include "compaction/janitor.hpp"

#include <unistd.h>

#include "compaction/client.hpp"
#include "core.hpp"
#include "pg/sqlstate.hpp"
#include "topics.hpp"

namespace compaction {

// What Cancel() needs to reach the sweep in flight.
struct Janitor::InFlight {
  std::mutex mutex;
  PGcancel* cancel = nullptr;  // set while a sweep holds a connection
  std::atomic<bool> cancelled{false};
};

namespace {

constexpr const char* kOp = "SweepHeadless";

std::string DefaultOwner() {
  static std::atomic<int> next{0};
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  return std::string(host) + ":" + std::to_string(getpid()) + ":" +
         std::to_string(next++);
}

void ValidateSweep(const SweepOptions& o) {
  if (o.batch_size <= 0) {
    throw InvalidArgument(kOp, "batch_size must be positive, got " +
                                   std::to_string(o.batch_size));
  }
  if (o.max_batches <= 0) {
    throw InvalidArgument(kOp, "max_batches must be positive, got " +
                                   std::to_string(o.max_batches));
  }
  if (o.statement_timeout.count() <= 0 || o.claim_ttl.count() <= 0) {
    throw InvalidArgument(kOp, "statement_timeout and claim_ttl must be positive");
  }
}

// Takes the topic's claim unless another owner holds a live one. Returns
// the topic id, or nullopt with `holder` set when skipped.
std::optional<std::int64_t> Claim(detail::ClientCore& core, pg::Session s,
                                  const std::string& topic,
                                  const std::string& owner,
                                  std::chrono::milliseconds ttl,
                                  std::string& holder) {
  const TopicInfo info = detail::ResolveTopic(core, s, kOp, topic);
  pg::Result r = pg::Exec(
      s, kOp,
      "UPDATE " + core.schema() +
          ".janitor_state SET claimed_by = $2, "
          "claimed_until = now() + $3 * interval '1 millisecond', "
          "last_sweep_started_at = now() WHERE topic_id = $1 AND "
          "(claimed_until IS NULL OR claimed_until < now() OR claimed_by = $2) "
          "RETURNING topic_id",
      pg::Params().Add(info.id).Add(owner).Add(
          static_cast<std::int64_t>(ttl.count())));
  if (PQntuples(r.get()) == 1) return info.id;
  pg::Result h = pg::Exec(s, kOp,
                          "SELECT claimed_by FROM " + core.schema() +
                              ".janitor_state WHERE topic_id = $1",
                          pg::Params().Add(info.id));
  holder = PQntuples(h.get()) ? std::string(pg::Text(h.get(), 0, 0)) : "";
  return std::nullopt;
}

// One batch, its own transaction. Rows are picked oldest first through the
// idle_since partial index, skipping locked keys, and the DELETE re-checks
// the seed's predicate against the cutoff the server computes from the
// topic's TTL.
std::int64_t RunBatch(detail::ClientCore& core, pg::Session s,
                      std::int64_t topic_id, const std::string& owner,
                      const SweepOptions& o) {
  pg::ExecScript(s.conn, kOp,
                 "BEGIN; SET LOCAL statement_timeout = '" +
                     std::to_string(o.statement_timeout.count()) + "ms'");
  pg::Exec(s, kOp,
           "UPDATE " + core.schema() +
               ".janitor_state SET claimed_until = now() + $3 * interval "
               "'1 millisecond' WHERE topic_id = $1 AND claimed_by = $2",
           pg::Params().Add(topic_id).Add(owner).Add(
               static_cast<std::int64_t>(o.claim_ttl.count())));
  const std::string head = core.HeadTable(topic_id);
  pg::Result r = pg::Exec(
      s, kOp,
      "/* compaction:SweepHeadless */ WITH cutoff AS ("
      "SELECT now() - headless_ttl_ms * interval '1 millisecond' AS at FROM " +
          core.schema() +
          ".topic WHERE id = $1), "
          "picked AS (SELECT h.message_key FROM " +
          head +
          " h, cutoff WHERE h.idle_since IS NOT NULL AND h.idle_since < "
          "cutoff.at ORDER BY h.idle_since, h.message_key LIMIT $2 "
          "FOR UPDATE OF h SKIP LOCKED), "
          "deleted AS (DELETE FROM " +
          head +
          " d USING picked, cutoff WHERE d.message_key = picked.message_key "
          "AND d.head_id IS NULL AND d.updated_at < cutoff.at RETURNING 1) "
          "SELECT count(*) FROM deleted",
      pg::Params().Add(topic_id).Add(o.batch_size));
  const std::int64_t deleted = pg::Int64(r.get(), 0, 0);
  pg::ExecScript(s.conn, kOp, "COMMIT");
  return deleted;
}

void Record(detail::ClientCore& core, pg::Session s, std::int64_t topic_id,
            const std::string& owner, std::int64_t deleted,
            const std::string& error) {
  pg::Exec(s, kOp,
           "UPDATE " + core.schema() +
               ".janitor_state SET claimed_by = NULL, claimed_until = NULL, "
               "last_sweep_finished_at = now(), "
               "last_success_at = CASE WHEN $4 = '' THEN now() "
               "ELSE last_success_at END, "
               "last_deleted_rows = $3, "
               "total_deleted_rows = total_deleted_rows + $3, "
               "last_error = NULLIF($4, '') "
               "WHERE topic_id = $1 AND claimed_by = $2",
           pg::Params().Add(topic_id).Add(owner).Add(deleted).Add(error));
}

}  // namespace

Janitor::Janitor(Client& client)
    : client_(client), in_flight_(std::make_shared<InFlight>()) {}

Janitor::~Janitor() = default;

void Janitor::Cancel() {
  std::lock_guard lock(in_flight_->mutex);
  in_flight_->cancelled = true;
  if (in_flight_->cancel != nullptr) {
    char error[256];
    PQcancel(in_flight_->cancel, error, sizeof error);
  }
}

SweepResult Janitor::SweepHeadless(const std::string& topic_name,
                                   const SweepOptions& options) {
  ValidateSweep(options);
  detail::ClientCore& core = *client_.core();
  const std::string owner = options.owner.empty() ? DefaultOwner() : options.owner;
  pg::Pool::Lease lease = core.pool().Acquire(kOp);
  const pg::Session s = (*lease).session();
  SweepResult result;
  const std::optional<std::int64_t> topic_id =
      Claim(core, s, topic_name, owner, options.claim_ttl, result.claimed_by);
  if (!topic_id) {
    result.skipped = true;
    return result;
  }
  {
    std::lock_guard lock(in_flight_->mutex);
    in_flight_->cancelled = false;
    in_flight_->cancel = PQgetCancel(s.conn);
  }
  struct ClearCancel {
    InFlight& f;
    ~ClearCancel() {
      std::lock_guard lock(f.mutex);
      PQfreeCancel(f.cancel);
      f.cancel = nullptr;
    }
  } clear{*in_flight_};
  try {
    while (result.batches < options.max_batches && !in_flight_->cancelled) {
      const std::int64_t deleted = RunBatch(core, s, *topic_id, owner, options);
      result.deleted += deleted;
      ++result.batches;
      if (deleted < options.batch_size) break;  // short batch: caught up
    }
    result.stopped_at_limit = result.batches == options.max_batches &&
                              !in_flight_->cancelled;
  } catch (const DatabaseError& e) {
    pg::ExecScript(s.conn, kOp, "ROLLBACK");
    if (!(in_flight_->cancelled && e.sqlstate() == pg::kQueryCanceled)) {
      Record(core, s, *topic_id, owner, result.deleted, e.what());
      throw;
    }
  }
  result.cancelled = in_flight_->cancelled;
  Record(core, s, *topic_id, owner, result.deleted, "");
  return result;
}

}  // namespace compaction
