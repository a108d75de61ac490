#include "compaction/tx.hpp"

#include "commit_outcome.hpp"
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
  const pg::Session s{connection, nullptr};
  if (!s.open()) throw InvalidArgument(kOp, "connection is not open");
  if (s.in_pipeline()) {
    throw InvalidArgument(kOp, "connection is in pipeline mode");
  }
  if (s.transaction_status() != pg::TransactionStatus::kInTransaction) {
    throw InvalidArgument(kOp,
                          "connection is not idle inside a transaction block "
                          "(issue BEGIN first; an aborted transaction cannot "
                          "be borrowed)");
  }
  return detail::TxGate::Make(std::make_unique<detail::TxState>(connection));
}

bool Tx::borrowed() const { return state().borrowed(); }
pg_conn* Tx::native_handle() const {
  // The caller's own statements must run inside the transaction, which
  // otherwise begins with the library's first statement. Not once it is
  // finished: its connection is back in the pool, maybe another's.
  detail::TxState& st = state();
  const pg::Session s = st.session();
  st.MarkNativeUsed();
  if (!st.finished() && s.needs_begin()) {
    pg::Exec(s, "Tx::native_handle", pg::kBeginTransaction);
  }
  return s.conn;
}

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
  if (session_.in_pipeline()) {
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
  pg::Result r =
      pg::Exec(s, operation,
               "SELECT pg_catalog.current_setting('transaction_isolation')");
  const std::string level(pg::Text(r, 0, 0));
  if (level != "read committed") {
    throw InvalidArgument(
        operation, "the borrowed transaction runs at isolation level " + level +
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

namespace detail {

void ResolveTxCommit(TxState& st, const char* operation) {
  try {
    detail::ResolveBrokenCommit(*st.core(), operation, st.session().server,
                                st.written());
  } catch (const ConnectionLost&) {
    // The message looked for is absent. After statements of the caller's
    // own, a ROLLBACK TO SAVEPOINT may have undone it while the rest
    // committed: absence then proves nothing, and a retry could write the
    // transaction's other messages twice.
    if (!st.native_used()) {
      st.Finish(TxStatus::kAborted);
      throw;
    }
    st.Finish(TxStatus::kInDoubt);
    throw CommitOutcomeUnknown(
        operation,
        "the connection broke during COMMIT; it may or may not have "
        "committed: the transaction's last message is absent, but statements "
        "sent on native_handle() (a ROLLBACK TO SAVEPOINT) may have undone "
        "it while the rest committed");
  } catch (...) {
    st.Finish(TxStatus::kInDoubt);
    throw;
  }
  st.Finish(TxStatus::kCommitted);
}

}  // namespace detail

void Tx::Commit() {
  constexpr const char* kOp = "Commit";
  detail::TxState& st = state();
  if (st.borrowed()) {
    throw UsageError(kOp, "a borrowed transaction is committed by its owner");
  }
  if (st.finished()) st.ThrowFinished(kOp);
  bool committed = false;
  try {
    committed = pg::Commit(st.session(), kOp);
  } catch (const CommitOutcomeUnknown&) {
    detail::ResolveTxCommit(st, kOp);
    return;
  } catch (...) {
    // The server refused COMMIT, or it was never sent (preparing it
    // failed): nothing was committed.
    st.Finish(TxStatus::kAborted);
    throw;
  }
  st.Finish(committed ? TxStatus::kCommitted : TxStatus::kAborted);
  if (!committed) {
    throw DatabaseError(kOp, std::string(pg::kInFailedTransaction),
                        "the transaction had failed and was rolled back");
  }
}

void Tx::Rollback() {
  if (!state_ || state_->borrowed() || state_->finished()) return;
  pg::RollbackQuietly(state_->session());
  state_->Finish(TxStatus::kAborted);
}

namespace detail {

Tx BeginTx(ClientCore& core) {
  pg::Pool::Lease lease = core.pool().Acquire("Begin");
  // Nothing is sent yet: BEGIN ISOLATION LEVEL READ COMMITTED goes out in
  // the pipeline of the transaction's first statement (pg::Session::
  // needs_begin), one round trip fewer per transaction. It is prepared on
  // each pooled connection like the library's other statements (COMMIT
  // too) unless ClientOptions::prepared_statements is off, which skips the
  // parse a simple query repeats on every call, as pgbench -M prepared
  // does (test/bench/RESULTS.md). READ COMMITTED whatever the server's or
  // role's default_transaction_isolation: the lock loop is defined for it
  // only.
  return TxGate::Make(
      std::make_unique<TxState>(core.shared_from_this(), std::move(lease)));
}

}  // namespace detail
}  // namespace compaction
