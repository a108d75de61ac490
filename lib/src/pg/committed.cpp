// ExecCommitted: one statement in a READ COMMITTED transaction of its own,
// in one round trip, and what its outcome was when the connection broke.
#include <libpq-fe.h>

#include "compaction/errors.hpp"
#include "pg/errors.hpp"
#include "pg/exec.hpp"
#include "pg/pipeline.hpp"

namespace compaction::pg {
namespace {

// An error the server sent, with its SQLSTATE; libpq's own errors for a
// lost connection have none.
bool HasSqlState(const Result& r) {
  return r && PQresultErrorField(r.get(), PG_DIAG_SQLSTATE) != nullptr;
}

bool RefusedByServer(const Result& r) {
  return HasSqlState(r) && PQresultStatus(r.get()) == PGRES_FATAL_ERROR;
}

// The results of ExecCommitted's pipeline judged: `commit` is COMMIT's
// index, the statement's is just before it. Throws the server's refusal;
// returns whether the outcome is in doubt.
bool JudgeCommitted(Session session, const char* operation,
                    const PipelineReply& reply, std::size_t commit) {
  const std::vector<Result>& results = reply.results;
  const auto ok = [&](std::size_t i) {
    return i < results.size() && Succeeded(results[i].get());
  };
  bool gone = !session.open() || !reply.left;
  for (const Result& r : results) gone = gone || IsConnectionGone(r.get());
  if (ok(commit) && results[commit].CommandTag() == "COMMIT") return false;
  // A statement before COMMIT refused by the server: the server skipped
  // COMMIT, or ended the backend before it (57P01).
  for (std::size_t i = 0; i < commit && i < results.size(); ++i) {
    if (!ok(i) && RefusedByServer(results[i])) {
      RollbackQuietly(session);
      ThrowError(operation, session.conn, results[i]);
    }
  }
  if (gone) return true;
  // COMMIT itself refused (a deferred constraint): nothing committed.
  RollbackQuietly(session);
  ThrowError(operation, session.conn,
             results.size() > commit ? results[commit].get() : nullptr);
}

// BEGIN, the session's local settings, the statement, a flush request
// (ResultFirst::kYes) and COMMIT: for a session behind a transaction pooler,
// whose settings hold per transaction only and whose isolation default is the
// server's, and for any session whose default isolation is not READ COMMITTED.
// Without `begin`, the statement ends a transaction block already open.
CommittedExec ExecInBlock(Session session, const char* operation,
                          const Statement& statement, ResultFirst first,
                          bool begin = true) {
  static const std::string kBegin = kBeginTransaction;
  static const std::string kCommit = "COMMIT";
  static const Params kNone;
  std::vector<StatementRef> all;
  if (begin) {
    all.push_back({&kBegin, &kNone});
    if (session.needs_local_settings()) {
      all.push_back({session.local_settings, &kNone});
    }
  }
  all.push_back(Ref(statement));
  all.push_back({&kCommit, &kNone});
  const std::size_t commit = all.size() - 1;
  // The flush request makes the server send the statement's result before
  // it runs COMMIT, instead of at the sync.
  PipelineReply reply = RunPipeline(
      session, operation, all, first == ResultFirst::kYes ? commit : kNoFlush);
  CommittedExec out;
  out.in_doubt =
      !reply.sent || JudgeCommitted(session, operation, reply, commit);
  if (reply.results.size() > commit - 1 &&
      Succeeded(reply.results[commit - 1].get())) {
    out.rows = std::move(reply.results[commit - 1]);
  }
  return out;
}

// The statement alone in an implicit transaction, which the server commits
// at the sync point: no BEGIN or COMMIT to parse, bind and run. Only for a
// session whose default isolation is READ COMMITTED (pinned by
// kPinnedSettings, checked at open). The flush request (kYes) still makes
// the server send the statement's result before it commits.
CommittedExec ExecImplicit(Session session, const char* operation,
                           const Statement& statement, ResultFirst first) {
  PipelineReply reply = RunPipeline(session, operation, {Ref(statement)},
                                    first == ResultFirst::kYes ? 1 : kNoFlush);
  CommittedExec out;
  if (!reply.results.empty()) out.rows = std::move(reply.results.front());
  if (!Succeeded(out.rows.get())) {
    // Refused by the server (57P01 included: the statement did not
    // complete, so nothing committed).
    if (HasSqlState(out.rows)) ThrowError(operation, session.conn, out.rows);
    out.rows.reset();
    out.in_doubt = true;  // sent, and nothing came back
    return out;
  }
  if (reply.synced && !reply.at_sync) return out;  // committed
  // The commit refused (a deferred constraint), and the server then said it
  // is ready again: nothing committed. Without that ReadyForQuery the error
  // may have come after the commit record (the server then PANICs), so the
  // outcome is in doubt like any break.
  if (reply.synced && HasSqlState(reply.at_sync) &&
      !IsConnectionGone(reply.at_sync.get())) {
    ThrowError(operation, session.conn, reply.at_sync);
  }
  out.in_doubt = true;
  return out;
}

}  // namespace

CommittedExec ExecCommitted(Session session, const char* operation,
                            const Statement& statement, ResultFirst first) {
  if (session.in_pipeline()) {
    throw InvalidArgument(operation, "the connection is in pipeline mode");
  }
  if (!session.open()) ThrowError(operation, session.conn, nullptr);
  // The implicit transaction runs at the session's default isolation: only
  // where that is READ COMMITTED (pinned at startup, unless something in
  // between dropped the startup options).
  const bool implicit =
      !session.needs_local_settings() && session.read_committed_default;
  return implicit ? ExecImplicit(session, operation, statement, first)
                  : ExecInBlock(session, operation, statement, first);
}

CommittedExec ExecAndCommit(Session session, const char* operation,
                            const Statement& statement, ResultFirst first) {
  if (session.in_pipeline()) {
    throw InvalidArgument(operation, "the connection is in pipeline mode");
  }
  if (!session.open()) ThrowError(operation, session.conn, nullptr);
  return ExecInBlock(session, operation, statement, first,
                     session.needs_begin());
}
}  // namespace compaction::pg
