#include "pg/session.hpp"

#include <libpq-fe.h>
#include <poll.h>

#include "pg/connect_error.hpp"
#include "pg/errors.hpp"

namespace compaction::pg {

void ConnDeleter::operator()(pg_conn* c) const noexcept { PQfinish(c); }

bool Session::open() const { return PQstatus(conn) == CONNECTION_OK; }

bool Session::in_pipeline() const {
  return PQpipelineStatus(conn) != PQ_PIPELINE_OFF;
}

TransactionStatus Session::transaction_status() const {
  switch (PQtransactionStatus(conn)) {
    case PQTRANS_IDLE:
      return TransactionStatus::kIdle;
    case PQTRANS_ACTIVE:
      return TransactionStatus::kActive;
    case PQTRANS_INTRANS:
      return TransactionStatus::kInTransaction;
    case PQTRANS_INERROR:
      return TransactionStatus::kInError;
    case PQTRANS_UNKNOWN:
      break;
  }
  return TransactionStatus::kUnknown;
}

bool Session::needs_local_settings() const {
  return local_settings != nullptr && !local_settings->empty() &&
         PQtransactionStatus(conn) == PQTRANS_IDLE &&
         PQpipelineStatus(conn) == PQ_PIPELINE_OFF;
}

bool Session::needs_begin() const {
  return begins_transaction && PQtransactionStatus(conn) == PQTRANS_IDLE &&
         PQpipelineStatus(conn) == PQ_PIPELINE_OFF;
}

ServerIdentity ReadServerIdentity(pg_conn* conn, const char* operation) {
  // pg_backend_pid() is compared with the pid libpq connected to: behind a
  // pooler they differ, and no backend of ours can be watched. No operator:
  // a connection opened for a transaction pooler runs this before any
  // per-transaction setting pins the search_path, where an operator another
  // role planted could stand in for pg_catalog's. The start time is only
  // compared: its epoch as numeric text, which no DateStyle or TimeZone of
  // the session changes.
  Result r(PQexecParams(
      conn,
      "SELECT s.system_identifier::text, extract(epoch FROM "
      "pg_catalog.pg_postmaster_start_time())::text, "
      "pg_catalog.pg_backend_pid() FROM pg_catalog.pg_control_system() s",
      0, nullptr, nullptr, nullptr, nullptr, 0));
  ServerIdentity identity;
  if (!Succeeded(r.get()) || r.rows() != 1) {
    if (PQstatus(conn) != CONNECTION_OK || IsConnectionGone(r.get())) {
      ThrowError(operation, conn, r.get());
    }
    return identity;  // unknown: e.g. a server without pg_control_system
  }
  identity.backend_pid = PQbackendPID(conn);
  r.set_operation(operation);
  if (r.Int64(0, 2) != identity.backend_pid) return identity;
  identity.system_identifier = std::string(r.Text(0, 0));
  identity.started = std::string(r.Text(0, 1));
  return identity;
}

bool DefaultIsReadCommitted(pg_conn* conn) {
  // Compared here, not with SQL's `=`: behind a transaction pooler this
  // runs without the pinned search_path, where an operator another role
  // planted could stand in for pg_catalog's.
  Result r(PQexec(conn,
                  "SELECT pg_catalog.current_setting("
                  "'default_transaction_isolation')"));
  return Succeeded(r.get()) && r.rows() == 1 &&
         r.Text(0, 0) == "read committed";
}

bool LooksAlive(pg_conn* conn) {
  // An idle connection has nothing to say but notifications; an error or
  // EOF means the server ended it. A terminated backend sends its FATAL
  // and then closes: libpq takes the FATAL of an idle connection as a
  // notice (to the notice receiver) and sees the end of the stream only on
  // the next read, so read until nothing is pending (bounded: a flood of
  // notifications is not worth more than a few reads here).
  for (int reads = 0; reads < 4; ++reads) {
    if (PQstatus(conn) != CONNECTION_OK) return false;
    pollfd p{PQsocket(conn), POLLIN, 0};
    if (::poll(&p, 1, 0) <= 0) return true;  // nothing pending: as it was
    if (PQconsumeInput(conn) == 0) return false;
  }
  return PQstatus(conn) == CONNECTION_OK;
}

namespace {

std::string ResultField(const PGresult* result, int field) {
  const char* value = PQresultErrorField(result, field);
  return value != nullptr ? value : "";
}

// libpq calls this from inside its own C code: nothing may escape.
void ReceiveNotice(void* arg, const PGresult* result) noexcept {
  const auto* handler = static_cast<const NoticeHandler*>(arg);
  if (handler == nullptr || !*handler || result == nullptr) return;
  try {
    Notice notice{ResultField(result, PG_DIAG_SEVERITY_NONLOCALIZED),
                  ResultField(result, PG_DIAG_SQLSTATE),
                  ResultField(result, PG_DIAG_MESSAGE_PRIMARY)};
    if (notice.severity.empty()) {
      notice.severity = ResultField(result, PG_DIAG_SEVERITY);
    }
    (*handler)(notice);
  } catch (...) {
  }
}

}  // namespace

void RouteNotices(pg_conn* conn, const NoticeHandler* handler) {
  if (conn == nullptr) return;
  PQsetNoticeReceiver(conn, &ReceiveNotice,
                      const_cast<NoticeHandler*>(handler));
}

ConnPtr Connect(const ConnParams& params, const SessionSettings& settings,
                const std::string& application_name, const char* operation,
                const NoticeHandler* notices, StartupOptions startup) {
  ConnParams all = ForConnection(params, settings);
  // A transaction pooler refuses the startup parameter, or accepts and
  // drops it; the caller applies the settings per transaction instead.
  if (startup == StartupOptions::kPerTransaction) all.erase("options");
  // The client's application_name wins over the conninfo's.
  all["application_name"] = application_name;
  const ParamArrays arrays(all);
  ConnPtr conn(PQconnectdbParams(arrays.keywords.data(), arrays.values.data(),
                                 /*expand_dbname=*/0));
  RouteNotices(conn.get(), notices);
  if (!conn || PQstatus(conn.get()) != CONNECTION_OK) {
    ThrowConnectFailure(operation, conn.get());
  }
  return conn;
}

}  // namespace compaction::pg
