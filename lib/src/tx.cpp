#include "compaction/tx.hpp"

#include <string_view>

#include "compaction/errors.hpp"
#include "core.hpp"
#include "pg/sqlstate.hpp"
#include "tx_internal.hpp"

namespace compaction {

Tx::Tx(std::unique_ptr<detail::TxState> state) : state_(std::move(state)) {}
Tx::Tx(Tx&&) noexcept = default;
Tx& Tx::operator=(Tx&& other) noexcept {
  if (this != &other) {
    Rollback();
    state_ = std::move(other.state_);
  }
  return *this;
}
Tx::~Tx() { Rollback(); }

Tx Tx::Borrow(pg_conn* connection) {
  constexpr const char* kOp = "Tx::Borrow";
  if (connection == nullptr) {
    throw InvalidArgument(kOp, "connection is null");
  }
  if (PQstatus(connection) != CONNECTION_OK) {
    throw InvalidArgument(kOp, "connection is not open");
  }
  if (PQpipelineStatus(connection) != PQ_PIPELINE_OFF) {
    throw InvalidArgument(kOp, "connection is in pipeline mode");
  }
  if (PQtransactionStatus(connection) != PQTRANS_INTRANS) {
    throw InvalidArgument(kOp,
                          "connection is not idle inside a transaction block "
                          "(issue BEGIN first; an aborted transaction cannot "
                          "be borrowed)");
  }
  return Tx(std::make_unique<detail::TxState>(connection));
}

bool Tx::borrowed() const { return state().borrowed(); }
pg_conn* Tx::native_handle() const { return state().session().conn; }

namespace detail {

pg::Session TxState::SessionFor(const char* operation) const {
  if (finished_) throw InvalidArgument(operation, "transaction already finished");
  if (PQpipelineStatus(session_.conn) != PQ_PIPELINE_OFF) {
    throw InvalidArgument(operation, "the connection is in pipeline mode");
  }
  return session_;
}

}  // namespace detail

detail::TxState& Tx::state() const {
  if (!state_) throw InvalidArgument("Tx", "transaction was moved from");
  return *state_;
}

void Tx::Commit() {
  constexpr const char* kOp = "Commit";
  state();  // throws on a moved-from Tx
  if (state_->borrowed()) {
    throw InvalidArgument(kOp, "a borrowed transaction is committed by its owner");
  }
  if (state_->finished()) throw InvalidArgument(kOp, "transaction already finished");
  PGconn* conn = state_->session().conn;
  pg::Result r;
  try {
    r = pg::ExecUnchecked(state_->session(), kOp, "COMMIT");
  } catch (...) {
    // Preparing failed, so COMMIT was never sent: the transaction did not
    // commit and is gone with the connection.
    state_->MarkFinished();
    throw;
  }
  const bool ok = r && PQresultStatus(r.get()) == PGRES_COMMAND_OK;
  // An aborted transaction answers COMMIT with the tag ROLLBACK.
  const bool rolled_back = ok && std::string_view(PQcmdStatus(r.get())) == "ROLLBACK";
  if (!ok && PQstatus(conn) == CONNECTION_BAD) {
    state_->MarkFinished();
    throw CommitOutcomeUnknown(
        kOp, "the connection broke during COMMIT; the transaction may or "
             "may not have committed");
  }
  if (!ok) {
    // Read the error before the connection goes back to the pool.
    const char* state = PQresultErrorField(r.get(), PG_DIAG_SQLSTATE);
    const char* primary = PQresultErrorField(r.get(), PG_DIAG_MESSAGE_PRIMARY);
    const std::string sqlstate = state ? state : "";
    const std::string message = primary ? primary : "COMMIT failed";
    state_->MarkFinished();
    pg::ThrowForSqlState(kOp, sqlstate, message, false);
  }
  state_->MarkFinished();
  if (rolled_back) {
    throw DatabaseError(kOp, "25P02",
                        "the transaction had failed and was rolled back");
  }
}

void Tx::Rollback() {
  if (!state_ || state_->borrowed() || state_->finished()) return;
  PGconn* conn = state_->session().conn;
  if (PQstatus(conn) == CONNECTION_OK) pg::Result(PQexec(conn, "ROLLBACK"));
  state_->MarkFinished();
}

namespace detail {

Tx BeginTx(ClientCore& core) {
  pg::Pool::Lease lease = core.pool().Acquire("Begin");
  // Prepared like every statement of the library (COMMIT too): the
  // extended protocol skips the parse that a simple query repeats on every
  // call, as pgbench -M prepared does (test/bench/RESULTS.md).
  pg::Exec((*lease).session(), "Begin", "BEGIN");
  return Tx(std::make_unique<TxState>(core.shared_from_this(), std::move(lease)));
}

}  // namespace detail
}  // namespace compaction
