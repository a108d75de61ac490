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
  return detail::TxGate::Make(std::make_unique<detail::TxState>(connection));
}

bool Tx::borrowed() const { return state().borrowed(); }
pg_conn* Tx::native_handle() const { return state().session().conn; }

namespace detail {

void TxState::ThrowFinished(const char* operation) const {
  switch (status_) {
    case TxStatus::kCommitted:
      throw UsageError(operation, "transaction already committed");
    case TxStatus::kInDoubt:
      throw UsageError(operation,
                       "transaction in doubt: the connection broke during its "
                       "COMMIT, which may or may not have committed");
    case TxStatus::kAborted:
    case TxStatus::kActive:
      break;
  }
  throw UsageError(operation, "transaction already rolled back");
}

pg::Session TxState::SessionFor(const char* operation) const {
  if (finished()) ThrowFinished(operation);
  if (PQpipelineStatus(session_.conn) != PQ_PIPELINE_OFF) {
    throw InvalidArgument(operation, "the connection is in pipeline mode");
  }
  return session_;
}

pg::Session TxState::WritingSessionFor(const char* operation) {
  const pg::Session s = SessionFor(operation);
  if (!borrowed() || read_committed_checked_) return s;
  // The caller's transaction may run at any level; reading it takes no
  // snapshot that matters at READ COMMITTED, and under REPEATABLE READ or
  // SERIALIZABLE the operation is refused anyway.
  pg::Result r = pg::Exec(
      s, operation,
      "SELECT pg_catalog.current_setting('transaction_isolation')");
  const std::string level(pg::Text(r.get(), 0, 0));
  if (level != "read committed") {
    throw InvalidArgument(operation,
                          "the borrowed transaction runs at isolation level " +
                              level +
                              "; LockCompactionHead and ProduceInTx need READ "
                              "COMMITTED (BEGIN ISOLATION LEVEL READ COMMITTED)");
  }
  read_committed_checked_ = true;
  return s;
}

std::optional<TopicInfo> TxState::TouchedTopic(const std::string& name) const {
  for (const TopicInfo& t : touched_topics_) {
    if (t.name == name) return t;
  }
  return std::nullopt;
}

void TxState::RememberTouchedTopic(const TopicInfo& topic) {
  if (TouchedTopic(topic.name)) return;
  touched_topics_.push_back(topic);
}

}  // namespace detail

detail::TxState& Tx::state() const {
  if (!state_) throw UsageError("Tx", "transaction was moved from");
  return *state_;
}

TxStatus Tx::status() const { return state().status(); }

void Tx::Commit() {
  constexpr const char* kOp = "Commit";
  detail::TxState& st = state();
  if (st.borrowed()) {
    throw UsageError(kOp, "a borrowed transaction is committed by its owner");
  }
  if (st.finished()) st.ThrowFinished(kOp);
  PGconn* conn = st.session().conn;
  pg::Result r;
  try {
    r = pg::ExecUnchecked(st.session(), kOp, "COMMIT");
  } catch (...) {
    // Preparing failed, so COMMIT was never sent: the transaction did not
    // commit and is gone with the connection.
    st.Finish(TxStatus::kAborted);
    throw;
  }
  const bool ok = r && PQresultStatus(r.get()) == PGRES_COMMAND_OK;
  // An aborted transaction answers COMMIT with the tag ROLLBACK.
  const bool rolled_back = ok && std::string_view(PQcmdStatus(r.get())) == "ROLLBACK";
  if (!ok && PQstatus(conn) == CONNECTION_BAD) {
    st.Finish(TxStatus::kInDoubt);
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
    st.Finish(TxStatus::kAborted);
    pg::ThrowForSqlState(kOp, sqlstate, message, false);
  }
  if (rolled_back) {
    st.Finish(TxStatus::kAborted);
    throw DatabaseError(kOp, "25P02",
                        "the transaction had failed and was rolled back");
  }
  st.Finish(TxStatus::kCommitted);
}

void Tx::Rollback() {
  if (!state_ || state_->borrowed() || state_->finished()) return;
  PGconn* conn = state_->session().conn;
  if (PQstatus(conn) == CONNECTION_OK) pg::Result(PQexec(conn, "ROLLBACK"));
  state_->Finish(TxStatus::kAborted);
}

namespace detail {

Tx BeginTx(ClientCore& core) {
  pg::Pool::Lease lease = core.pool().Acquire("Begin");
  // Prepared like every statement of the library (COMMIT too): the
  // extended protocol skips the parse that a simple query repeats on every
  // call, as pgbench -M prepared does (test/bench/RESULTS.md).
  // READ COMMITTED whatever the server's or role's
  // default_transaction_isolation: the lock loop is defined for it only.
  pg::Exec((*lease).session(), "Begin",
           "BEGIN ISOLATION LEVEL READ COMMITTED");
  return TxGate::Make(
      std::make_unique<TxState>(core.shared_from_this(), std::move(lease)));
}

}  // namespace detail
}  // namespace compaction
