#include "pg/exec.hpp"

#include <libpq-fe.h>

#include <cstdio>
#include <random>

#include "compaction/errors.hpp"
#include "pg/errors.hpp"
#include "pg/pipeline.hpp"

namespace compaction::pg {

ParamPointers::ParamPointers(
    const std::vector<std::optional<std::string>>& values) {
  const char** out = inline_.data();
  if (values.size() > inline_.size()) {
    on_heap_.resize(values.size());
    out = on_heap_.data();
  }
  for (const auto& v : values) *out++ = v ? v->c_str() : nullptr;
}

std::string RandomStatementPrefix() {
  static thread_local std::mt19937_64 engine{std::random_device{}()};
  char text[20];
  std::snprintf(text, sizeof text, "c%016llx_",
                static_cast<unsigned long long>(engine()));
  return text;
}

const std::string& PreparedCache::Prepare(pg_conn* conn, const char* operation,
                                          const std::string& sql, int n_params,
                                          std::size_t slot) {
  // The slot vector grows to the highest slot used: a client touching
  // thousands of topics finds its later ones by text instead.
  if (slot >= kMaxSlots) slot = kNoSlot;
  if (slot != kNoSlot) {
    if (slot < by_slot_.size() && !by_slot_[slot].name.empty() &&
        by_slot_[slot].sql == sql) {
      return by_slot_[slot].name;
    }
  } else {
    auto it = names_.find(sql);
    if (it != names_.end()) return it->second;
  }
  // Generated SQL differs per topic, so a process that touches thousands
  // of topics would keep thousands of plans per backend: start over.
  if (names_.size() + slotted_ >= kMaxPrepared) {
    Result cleared(PQexec(conn, "DEALLOCATE ALL"));
    if (!Succeeded(cleared.get())) ThrowError(operation, conn, cleared.get());
    Clear();
  }
  std::string name = prefix_ + std::to_string(next_++);
  Result result(PQprepare(conn, name.c_str(), sql.c_str(), n_params, nullptr));
  if (!Succeeded(result.get())) ThrowError(operation, conn, result.get());
  if (slot == kNoSlot)
    return names_.emplace(sql, std::move(name)).first->second;
  if (by_slot_.size() <= slot) by_slot_.resize(slot + 1);
  // Counted even when it replaces another client's statement in the slot:
  // that one stays prepared on the server until the cache starts over.
  ++slotted_;
  by_slot_[slot] = Slot{sql, std::move(name)};
  return by_slot_[slot].name;
}

namespace {

Result ExecUncheckedIn(Session session, const char* operation,
                       const std::string& sql, std::size_t slot,
                       const Params& params) {
  const ParamPointers values = params.Pointers();
  Result result(nullptr, operation);
  if (session.cache != nullptr) {
    const std::string& name = session.cache->Prepare(session.conn, operation,
                                                     sql, params.size(), slot);
    result.reset(PQexecPrepared(session.conn, name.c_str(), params.size(),
                                values.data(), nullptr, nullptr, 0));
  } else {
    result.reset(PQexecParams(session.conn, sql.c_str(), params.size(), nullptr,
                              values.data(), nullptr, nullptr, 0));
  }
  return result;
}

// The pipeline of `requested` with BEGIN and the session's settings in
// front when it needs them (one round trip all the same), judged as
// ExecPipelinedResults says.
std::vector<Result> RunPrefixed(Session session, const char* operation,
                                const std::vector<StatementRef>& requested);

Result ExecIn(Session session, const char* operation, const std::string& sql,
              std::size_t slot, const Params& params) {
  if (session.needs_local_settings() || session.needs_begin()) {
    std::vector<Result> results =
        RunPrefixed(session, operation, {StatementRef{&sql, &params, slot}});
    if (!Succeeded(results.front().get())) {
      ThrowError(operation, session.conn, results.front());
    }
    return std::move(results.front());
  }
  Result result = ExecUncheckedIn(session, operation, sql, slot, params);
  if (!Succeeded(result.get()))
    ThrowError(operation, session.conn, result.get());
  return result;
}

}  // namespace

Result ExecUnchecked(Session session, const char* operation,
                     const std::string& sql, const Params& params) {
  return ExecUncheckedIn(session, operation, sql, kNoSlot, params);
}

Result Exec(Session session, const char* operation, const std::string& sql,
            const Params& params) {
  return ExecIn(session, operation, sql, kNoSlot, params);
}

Result Exec(Session session, const char* operation, const FixedSql& sql,
            const Params& params) {
  return ExecIn(session, operation, sql.text, sql.slot, params);
}

Result ExecStatement(Session session, const char* operation,
                     const Statement& statement) {
  return ExecIn(session, operation, statement.sql(), statement.slot(),
                statement.params);
}

namespace {

std::vector<Result> RunPrefixed(Session session, const char* operation,
                                const std::vector<StatementRef>& requested) {
  if (session.in_pipeline()) {
    // A borrowed connection put into the caller's own pipeline after
    // Tx::Borrow; preparing (a synchronous call) would fail there too.
    throw InvalidArgument(operation, "the connection is in pipeline mode");
  }
  // The statements up to the sync point are one transaction (or the start
  // of one, when a BEGIN follows), so settings made first hold for all.
  // After a leading BEGIN, though: its isolation level must come before any
  // query (the settings' SELECT takes a snapshot), which matters when the
  // server's default is not READ COMMITTED.
  const bool leads_with_begin =
      !requested.empty() && requested.front().sql->starts_with("BEGIN");
  const bool with_begin = session.needs_begin() && !leads_with_begin;
  const bool with_settings = session.needs_local_settings();
  const std::size_t settings_at = leads_with_begin || with_begin ? 1 : 0;
  static const std::string kBegin = kBeginTransaction;
  static const Params kNone;
  std::vector<StatementRef> statements;
  statements.reserve(requested.size() + 2);
  if (with_begin) statements.push_back({&kBegin, &kNone});
  statements.insert(statements.end(), requested.begin(), requested.end());
  if (with_settings) {
    statements.insert(statements.begin() + settings_at,
                      StatementRef{session.local_settings, &kNone});
  }
  PipelineReply reply = RunPipeline(session, operation, statements);
  const std::size_t added = (with_begin ? 1 : 0) + (with_settings ? 1 : 0);
  const bool complete = reply.sent && reply.left && reply.synced &&
                        reply.results.size() == statements.size();
  // A failed BEGIN or settings statement, or an incomplete pipeline: the
  // first error the server sent first (it carries the SQLSTATE).
  for (std::size_t i = 0; i < reply.results.size(); ++i) {
    if ((i < added || !complete) && !Succeeded(reply.results[i].get())) {
      ThrowError(operation, session.conn, reply.results[i]);
    }
  }
  // Then the implicit transaction's COMMIT refused at the sync point.
  if (reply.at_sync) ThrowError(operation, session.conn, reply.at_sync);
  if (!complete) ThrowError(operation, session.conn, nullptr);
  if (with_settings) {
    reply.results.erase(reply.results.begin() + settings_at);
  }
  if (with_begin) reply.results.erase(reply.results.begin());
  return std::move(reply.results);
}

}  // namespace

std::vector<Result> ExecPipelinedResults(
    Session session, const char* operation,
    const std::vector<Statement>& requested) {
  std::vector<StatementRef> refs;
  refs.reserve(requested.size());
  for (const Statement& st : requested) refs.push_back(Ref(st));
  return RunPrefixed(session, operation, refs);
}

std::vector<Result> ExecPipelined(Session session, const char* operation,
                                  const std::vector<Statement>& requested) {
  std::vector<Result> results =
      ExecPipelinedResults(session, operation, requested);
  // The first statement that failed; the server skipped the rest.
  for (const Result& r : results) {
    if (!Succeeded(r.get())) ThrowError(operation, session.conn, r);
  }
  return results;
}

Result ExecScript(pg_conn* conn, const char* operation,
                  const std::string& sql) {
  Result result(PQexec(conn, sql.c_str()), operation);
  if (!Succeeded(result.get())) ThrowError(operation, conn, result.get());
  return result;
}

Result ExecScript(Session session, const char* operation,
                  const std::string& sql) {
  std::string prefix;
  if (session.needs_begin()) prefix = std::string(kBeginTransaction) + "; ";
  if (session.needs_local_settings()) {
    prefix += *session.local_settings + "; ";
  }
  if (prefix.empty()) return ExecScript(session.conn, operation, sql);
  return ExecScript(session.conn, operation, prefix + sql);
}

bool Commit(Session session, const char* operation) {
  // Nothing was ever sent: the transaction never began on the server.
  if (session.needs_begin()) return true;
  // Prepared like any statement (unless the session sends unnamed ones);
  // preparing may fail, and then COMMIT was never sent.
  Result r = ExecUnchecked(session, operation, "COMMIT");
  if (!Succeeded(r.get())) {
    if (!session.open() || IsConnectionGone(r.get())) {
      throw CommitOutcomeUnknown(
          operation,
          "the connection broke during COMMIT; the transaction may or may "
          "not have committed");
    }
    ThrowError(operation, session.conn, r.get());
  }
  // An aborted transaction answers COMMIT with the tag ROLLBACK.
  return r.CommandTag() != "ROLLBACK";
}

void RollbackQuietly(Session session) {
  if (!session.open() ||
      session.transaction_status() == TransactionStatus::kIdle) {
    return;
  }
  Result(PQexec(session.conn, "ROLLBACK"));
}

}  // namespace compaction::pg
