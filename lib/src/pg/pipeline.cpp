#include "pg/pipeline.hpp"

#include <libpq-fe.h>

#include <string>

#include "pg/errors.hpp"

namespace compaction::pg {
namespace {

// Statement names for a pipeline, prepared beforehand (a round trip of its
// own, once per connection and statement). Preparing one statement can make
// the cache start over and drop the others on the server, so the names
// count only when the cache kept its generation throughout; the second pass
// finds the cache nearly empty and cannot start over again.
std::vector<std::string> PrepareAll(
    Session session, const char* operation,
    const std::vector<StatementRef>& statements) {
  std::vector<std::string> names;
  if (session.cache == nullptr) return names;  // unnamed statements
  names.reserve(statements.size());
  for (;;) {
    names.clear();
    const std::uint64_t generation = session.cache->generation();
    for (const StatementRef& st : statements) {
      names.push_back(session.cache->Prepare(session.conn, operation, *st.sql,
                                             st.params->size(), st.slot));
    }
    if (session.cache->generation() == generation) return names;
  }
}

// Queues one statement in pipeline mode; false when libpq refuses it.
bool SendPipelined(Session session, const std::string* name,
                   const StatementRef& statement) {
  const ParamPointers values = statement.params->Pointers();
  const int n = statement.params->size();
  if (name != nullptr) {
    return PQsendQueryPrepared(session.conn, name->c_str(), n, values.data(),
                               nullptr, nullptr, 0) == 1;
  }
  return PQsendQueryParams(session.conn, statement.sql->c_str(), n, nullptr,
                           values.data(), nullptr, nullptr, 0) == 1;
}

// Reads up to and including the sync point after a pipeline's last
// statement. True when the sync came; `error` keeps the first error the
// server sent before it (the implicit COMMIT's refusal). False when the
// connection broke first.
bool ReadSync(pg_conn* conn, Result& error) {
  for (int nulls = 0; nulls < 1000;) {
    Result r(PQgetResult(conn));
    if (r == nullptr) {
      if (PQstatus(conn) != CONNECTION_OK) return false;
      ++nulls;
      continue;
    }
    if (PQresultStatus(r.get()) == PGRES_PIPELINE_SYNC) return true;
    if (!error && !Succeeded(r.get())) error = std::move(r);
  }
  return false;
}

// Leaves pipeline mode whatever happened before. When results are still
// pending on a live connection, they are synced and drained first; false
// when even that fails (the connection is then unusable and not pooled).
bool LeavePipeline(pg_conn* conn) {
  if (PQpipelineStatus(conn) == PQ_PIPELINE_OFF) return true;
  if (PQexitPipelineMode(conn) == 1) return true;
  if (PQstatus(conn) != CONNECTION_OK || PQpipelineSync(conn) != 1) {
    return false;
  }
  // Everything up to and including the sync point (an earlier sync still
  // unread comes first).
  for (Result ignored; ReadSync(conn, ignored);) {
    if (PQexitPipelineMode(conn) == 1) return true;
  }
  return false;
}

}  // namespace

PipelineReply RunPipeline(Session session, const char* operation,
                          const std::vector<StatementRef>& statements,
                          std::size_t flush_before) {
  const std::vector<std::string> names =
      PrepareAll(session, operation, statements);
  if (PQenterPipelineMode(session.conn) != 1) {
    ThrowError(operation, session.conn, nullptr);
  }
  PipelineReply reply;
  bool sent = true;
  for (std::size_t i = 0; i < statements.size() && sent; ++i) {
    if (i == flush_before) sent = PQsendFlushRequest(session.conn) == 1;
    sent = sent && SendPipelined(session, names.empty() ? nullptr : &names[i],
                                 statements[i]);
  }
  if (flush_before == statements.size()) {
    sent = sent && PQsendFlushRequest(session.conn) == 1;
  }
  reply.sent = sent && PQpipelineSync(session.conn) == 1;
  if (reply.sent) {
    reply.results.reserve(statements.size());
    for (std::size_t i = 0; i < statements.size(); ++i) {
      Result r(PQgetResult(session.conn), operation);
      if (r == nullptr) break;
      // Each statement's results end with a null result.
      while (PGresult* extra = PQgetResult(session.conn)) PQclear(extra);
      reply.results.push_back(std::move(r));
    }
    reply.synced = ReadSync(session.conn, reply.at_sync);
  }
  const bool out_of_step = reply.sent && !reply.synced && session.open();
  reply.left = !out_of_step && LeavePipeline(session.conn);
  return reply;
}

}  // namespace compaction::pg
