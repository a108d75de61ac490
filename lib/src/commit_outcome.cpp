#include "commit_outcome.hpp"

#include <algorithm>
#include <chrono>
#include <optional>
#include <string>
#include <thread>

#include "compaction/errors.hpp"
#include "rows.hpp"

namespace compaction::detail {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// What a look on the new connection found.
enum class Finding { kCommitted, kNotCommitted, kUnknown };

struct Verdict {
  Finding finding;
  std::string why;  // for kUnknown
};

// How much older than the topic's shortest retention a message must not be
// for its absence to count: the log cleaner deletes by created_at on the
// server's clock, and that clock may step.
constexpr milliseconds kRetentionMargin = std::chrono::minutes(1);

// The check's statements on its new connection. Behind a transaction
// pooler that drops startup `options` the search_path would not be pinned:
// the settings then go ahead of each statement, as on the pool's
// connections.
pg::Session CheckSession(ClientCore& core, pg_conn* conn) {
  return pg::Session{conn, nullptr, &core.pool().local_settings()};
}

milliseconds Left(Clock::time_point deadline) {
  return std::max(milliseconds(0), std::chrono::duration_cast<milliseconds>(
                                       deadline - Clock::now()));
}

// A new connection with the client's parameters (a multi-host conninfo
// with target_session_attrs=read-write finds the promoted standby), retried
// until the deadline: during a failover nothing accepts writes for a while.
pg::ConnPtr ConnectBefore(ClientCore& core, Clock::time_point deadline) {
  milliseconds pause(50);
  for (;;) {
    pg::ConnParams params = core.params();
    // libpq waits at least 2 s per host; the deadline still bounds the loop.
    const auto seconds = std::max<std::int64_t>(
        2, std::chrono::duration_cast<std::chrono::seconds>(Left(deadline))
               .count());
    params["connect_timeout"] = std::to_string(seconds);
    try {
      return pg::Connect(params, core.options().session_settings,
                         core.options().application_name, "commit check",
                         &core.options().notice_handler);
    } catch (const AuthenticationFailed&) {
      // The same credentials will be refused again: the outcome stays
      // unknown (CommitOutcomeUnknown), not an authentication error.
      return nullptr;
    } catch (const ConnectionLost&) {
      if (Left(deadline) <= pause) return nullptr;
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, milliseconds(500));
  }
}

// Waits until backend `pid` has left pg_stat_activity: it has then ended
// its transaction one way or the other (a terminated backend aborts before
// its entry goes, a committed one has left the proc array). False on
// timeout.
bool BackendGone(ClientCore& core, pg_conn* conn, int pid,
                 Clock::time_point deadline) {
  pg::Params params;
  params.Add(pid);
  for (;;) {
    pg::Result r = pg::Exec(CheckSession(core, conn), "commit check",
                            "SELECT pg_catalog.count(*) FROM "
                            "pg_catalog.pg_stat_activity WHERE pid = $1",
                            params);
    if (pg::Int64(r, 0, 0) == 0) return true;
    if (Left(deadline).count() == 0) return false;
    std::this_thread::sleep_for(milliseconds(10));
  }
}

// On Citus, whether the coordinator recorded a two-phase commit of backend
// `pid` (pg_dist_transaction, readable by every role; the gid reads
// citus_<group>_<pid>_<number>_<connection>). Such a transaction committed
// on the coordinator, but a worker may still hold its part prepared and
// invisible until Citus's recovery commits it. A row goes only once its
// worker holds no such prepared transaction, so a row absent before the
// look means the look sees everything that committed. A row of an earlier
// transaction of the same pid also counts: the answer is then unknown,
// never wrong.
bool TwoPhaseRecorded(ClientCore& core, pg_conn* conn, int pid) {
  pg::Params params;
  params.Add(std::to_string(pid));
  pg::Result r = pg::Exec(
      CheckSession(core, conn), "commit check",
      "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_dist_transaction WHERE "
      "pg_catalog.split_part(gid, '_', 3) = $1)",
      params);
  return pg::Bool(r, 0, 0);
}

struct Look {
  bool present = false;
  // The topic still exists and is young enough that the cleaner cannot
  // have removed the message: absence then means it was never committed.
  bool absence_counts = false;
};

// On Citus, the message's partition ($1 its id, $2 its key), so that the
// look is routed to its shard alone: the key's hash (sql/citus_topic_v1.sql)
// or, unkeyed, the id's (the column default of sql/topic_v1.sql: the id it
// drew modulo the partitions). The partition count never changes. Empty
// when the topic is gone.
std::optional<std::string> MessageShard(ClientCore& core, pg_conn* conn,
                                        const WrittenMessage& m) {
  if (!core.citus()) return "";
  pg::Params params;
  params.Add(m.topic_id);
  pg::Result r = pg::Exec(
      CheckSession(core, conn), "commit check",
      "SELECT t.partitions FROM " + core.schema() + ".topic t WHERE t.id = $1",
      params);
  if (r.rows() == 0) return std::nullopt;
  const std::string n = std::to_string(pg::Int64(r, 0, 0)) + "::bigint";
  if (!m.key) return " AND m.partition = ($1::bigint % " + n + ")::integer";
  return " AND m.partition = ((pg_catalog.hashtextextended($2::text, "
         "0::bigint) % " +
         n + " + " + n + ") % " + n + ")::integer";
}

Look LookFor(ClientCore& core, pg_conn* conn, const WrittenMessage& m) {
  const std::optional<std::string> shard = MessageShard(core, conn, m);
  // The topic is gone: so is its message table, and nothing can be told.
  if (!shard) return Look{};
  pg::Params params;
  params.Add(m.id).Add(m.key).Add(m.created_at_us).Add(m.topic_id);
  pg::Result r = pg::Exec(
      CheckSession(core, conn), "commit check",
      "SELECT EXISTS (SELECT 1 FROM " + core.MessageTable(m.topic_id) +
          " m WHERE m.id = $1 AND m.message_key IS NOT DISTINCT FROM $2 "
          "AND " +
          Micros("m.created_at") + " = $3::bigint" + *shard +
          "), "
          "(SELECT LEAST(t.retention_ms, "
          "t.tombstone_retention_ms) FROM " +
          core.schema() + ".topic t WHERE t.id = $4), " +
          Micros("pg_catalog.clock_timestamp()"),
      params);
  Look look;
  look.present = pg::Bool(r, 0, 0);
  const std::optional<std::int64_t> retention_ms = pg::OptInt64(r, 0, 1);
  const std::int64_t age_ms = (pg::Int64(r, 0, 2) - m.created_at_us) / 1000;
  look.absence_counts =
      retention_ms && age_ms + kRetentionMargin.count() < *retention_ms;
  return look;
}

Verdict Resolve(ClientCore& core, const pg::ServerIdentity* old,
                const WrittenMessage& effect) {
  const Clock::time_point deadline =
      Clock::now() + core.options().commit_check_timeout;
  pg::ConnPtr conn = ConnectBefore(core, deadline);
  if (!conn) {
    return {Finding::kUnknown,
            "no server could be reached (or one refused the role)"};
  }
  const pg::ServerIdentity now =
      pg::ReadServerIdentity(conn.get(), "commit check");
  // Visible means committed, on whichever server shows it.
  if (LookFor(core, conn.get(), effect).present)
    return {Finding::kCommitted, ""};
  if (old == nullptr || !old->SameServer(now)) {
    return {Finding::kUnknown,
            "the new connection reached another server (a failover?) or "
            "cannot tell which"};
  }
  if (!BackendGone(core, conn.get(), old->backend_pid, deadline)) {
    return {Finding::kUnknown, "the old backend was still running"};
  }
  const bool prepared =
      core.citus() && TwoPhaseRecorded(core, conn.get(), old->backend_pid);
  const Look look = LookFor(core, conn.get(), effect);
  if (look.present) return {Finding::kCommitted, ""};
  if (prepared) {
    return {Finding::kUnknown,
            "Citus recorded a two-phase commit of the old backend "
            "(pg_dist_transaction): a worker may still hold its part "
            "prepared until recovery commits it"};
  }
  if (!look.absence_counts) {
    return {Finding::kUnknown,
            "the topic is gone or its retention may have removed the "
            "message"};
  }
  return {Finding::kNotCommitted, ""};
}

// The one rule for both: a broken COMMIT is checked, and so a committing
// statement's result is wanted first, only with a timeout above zero.
bool CommitCheckOn(const ClientCore& core) {
  return core.options().commit_check_timeout.count() > 0;
}

}  // namespace

pg::ResultFirst ResultBeforeCommit(const ClientCore& core) {
  return CommitCheckOn(core) ? pg::ResultFirst::kYes : pg::ResultFirst::kNo;
}

void ResolveBrokenCommit(ClientCore& core, const char* operation,
                         const pg::ServerIdentity* old,
                         const std::optional<WrittenMessage>& effect) {
  const std::string prefix =
      "the connection broke during COMMIT; it may or may not have committed: ";
  // Disabled first: without the check the produce asked for no result
  // ahead of the commit (ResultBeforeCommit), so none is at hand.
  if (!CommitCheckOn(core)) {
    throw CommitOutcomeUnknown(operation, prefix + "commit check disabled");
  }
  if (!effect) {
    throw CommitOutcomeUnknown(
        operation, prefix + "the transaction wrote no message to look for");
  }
  Verdict verdict{Finding::kUnknown, ""};
  try {
    verdict = Resolve(core, old, *effect);
  } catch (const Error& e) {
    // The check itself failed (the new connection broke too, the table is
    // gone): the outcome stays open.
    verdict = {Finding::kUnknown, std::string("the check failed: ") + e.what()};
  }
  switch (verdict.finding) {
    case Finding::kCommitted:
      return;
    case Finding::kNotCommitted:
      throw ConnectionLost(
          operation,
          "the connection broke during COMMIT, which did not commit (checked "
          "on a new connection to the same server once the old backend had "
          "ended): safe to retry");
    case Finding::kUnknown:
      break;
  }
  throw CommitOutcomeUnknown(
      operation,
      prefix + verdict.why + " (within " +
          std::to_string(core.options().commit_check_timeout.count()) + " ms)");
}

}  // namespace compaction::detail
