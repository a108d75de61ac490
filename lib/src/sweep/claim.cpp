#include "sweep/claim.hpp"

#include <unistd.h>

#include <atomic>
#include <utility>

#include "compaction/errors.hpp"
#include "core.hpp"

namespace compaction::sweep {
namespace {

// "N milliseconds", for a $n::interval parameter (exact types: no bigint *
// interval, which resolves through an implicit cast that any role could
// shadow with an exact operator).
std::string IntervalText(std::chrono::milliseconds d) {
  return std::to_string(d.count()) + " milliseconds";
}

}  // namespace

std::string DefaultOwner() {
  static std::atomic<int> next{0};
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  return std::string(host) + ":" + std::to_string(getpid()) + ":" +
         std::to_string(next++);
}

Claim::Claim(detail::ClientCore& core, pg::Session s, const char* operation,
             Ledger ledger, std::int64_t topic_id, std::string owner)
    : core_(&core),
      session_(s),
      operation_(operation),
      ledger_(ledger),
      topic_id_(topic_id),
      owner_(std::move(owner)) {}

// A row another transaction holds locked is skipped, so the sweep reports
// itself skipped, a renewal counts as lost and a record is dropped (the
// claim then lapses by its TTL) instead of hanging until a timeout.
std::string Claim::Update(const std::string& set,
                          const std::string& condition) const {
  const std::string table = core_->schema() + "." + ledger_.table;
  return "WITH target AS (SELECT topic_id FROM " + table +
         " WHERE topic_id = $1 FOR UPDATE SKIP LOCKED) UPDATE " + table +
         " AS j SET " + set +
         " FROM target WHERE j.topic_id = target.topic_id"
         " AND " +
         condition + " RETURNING j.topic_id";
}

std::optional<Claim> Claim::Take(
    detail::ClientCore& core, pg::Session s, const char* operation,
    Ledger ledger, std::int64_t topic_id, const std::string& topic_name,
    std::string owner, std::chrono::milliseconds ttl, std::string& holder) {
  Claim claim(core, s, operation, ledger, topic_id, std::move(owner));
  pg::Result r = pg::Exec(
      s, operation,
      claim.Update("claimed_by = $2, claimed_until = pg_catalog.now() + "
                   "$3::interval, last_sweep_started_at = pg_catalog.now()",
                   "(j.claimed_until IS NULL OR j.claimed_until < "
                   "pg_catalog.now() OR j.claimed_by = $2::text)"),
      pg::Params().Add(topic_id).Add(claim.owner_).Add(IntervalText(ttl)));
  if (r.rows() == 1) return claim;
  pg::Result h = pg::Exec(
      s, operation,
      "SELECT CASE WHEN claimed_until > pg_catalog.now() THEN claimed_by END "
      "FROM " +
          core.schema() + "." + ledger.table + " WHERE topic_id = $1",
      pg::Params().Add(topic_id));
  // The state row goes with the topic (ON DELETE CASCADE): no row means the
  // topic was destroyed after the caller resolved it.
  if (h.rows() == 0) throw TopicNotFound(operation, topic_name);
  // No live claim, yet the claim skipped the row: a transaction holds it.
  holder = pg::IsNull(h, 0, 0) ? "(another transaction holds the " +
                                     std::string(ledger.table) + " row)"
                               : std::string(pg::Text(h, 0, 0));
  return std::nullopt;
}

bool Claim::Renew(std::chrono::milliseconds ttl) {
  pg::Result r =
      pg::Exec(session_, operation_,
               Update("claimed_until = pg_catalog.now() + $3::interval",
                      "j.claimed_by = $2::text"),
               pg::Params().Add(topic_id_).Add(owner_).Add(IntervalText(ttl)));
  return r.rows() == 1;
}

void Claim::Record(std::int64_t rows, const std::string& error) {
  pg::Exec(session_, operation_,
           Update("claimed_by = NULL, claimed_until = NULL, "
                  "last_sweep_finished_at = pg_catalog.now(), "
                  "last_success_at = CASE WHEN $4::text = '' THEN "
                  "pg_catalog.now() ELSE j.last_success_at END, "
                  "last_deleted_rows = $3::bigint, "
                  "total_deleted_rows = j.total_deleted_rows + $3::bigint, "
                  "last_error = NULLIF($4::text, '')",
                  "j.claimed_by = $2::text"),
           pg::Params().Add(topic_id_).Add(owner_).Add(rows).Add(error));
}

}  // namespace compaction::sweep
