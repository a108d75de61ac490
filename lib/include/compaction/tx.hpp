// Tx: one database transaction on one connection.
//
// Lifetime: an owned Tx (from Client::Begin or Client::InTransaction) holds a
// pooled connection until it is committed, rolled back or destroyed; the
// destructor rolls back. An owned Tx sends nothing when it is made: its BEGIN
// goes out with its first statement, in the same round trip. A borrowed Tx
// (Tx::Borrow) wraps a caller's own connection that is already inside a
// transaction; it never commits, rolls back or closes that connection. Thread
// safety: a Tx is used by one thread at a time, like the connection under it.
#pragma once

#include <memory>

#include "compaction/export.hpp"

struct pg_conn;  // libpq's connection; no public header includes libpq-fe.h

namespace compaction {

namespace detail {
class TxState;
class TxGate;  // the library's way in; defined in its sources only
}  // namespace detail

// What the library knows of a transaction's outcome.
enum class TxStatus {
  kActive,     // open; a borrowed Tx always reads so (its owner decides)
  kCommitted,  // Commit succeeded
  kAborted,    // rolled back, or its COMMIT failed: nothing was written
  kInDoubt,    // the connection broke during COMMIT (CommitOutcomeUnknown):
               // it may or may not have committed
};

class COMPACTION_EXPORT Tx {
 public:
  // Wraps `connection`, which must already be inside a transaction block
  // (BEGIN issued by the caller). The caller keeps ownership and decides the
  // outcome with its own COMMIT or ROLLBACK. Throws InvalidArgument when the
  // connection is null, broken or not inside a transaction. The transaction
  // must be READ COMMITTED: LockCompactionHead and ProduceInTx refuse
  // another level with InvalidArgument before writing anything. Pin the
  // connection's search_path as the library does for its own
  // (options='-c search_path=pg_catalog,pg_temp' in its conninfo). Use one
  // Tx per transaction: the keys a Tx locked (which a keyed produce without
  // compaction may not write) are remembered by that Tx, so a second Borrow
  // of the same transaction does not know them.
  static Tx Borrow(pg_conn* connection);

  Tx(Tx&&) noexcept;
  Tx& operator=(Tx&&) noexcept;
  Tx(const Tx&) = delete;
  Tx& operator=(const Tx&) = delete;
  ~Tx();

  // Commits an owned transaction. Throws CommitOutcomeUnknown when the
  // connection breaks during COMMIT; UsageError on a borrowed, moved-from or
  // finished Tx (naming its status: committed, aborted or in doubt).
  void Commit();
  // Rolls back an owned transaction; no-op once finished.
  void Rollback();

  // These three throw UsageError on a moved-from Tx.
  TxStatus status() const;
  bool borrowed() const;
  // The connection, inside the transaction: on an active owned Tx that has
  // sent nothing yet, this sends its BEGIN first (one round trip, which may
  // throw the library's connection errors), so statements run on the
  // handle belong to the transaction. Use it only on the thread that owns
  // the Tx, leave it idle inside the transaction block, and not after the
  // Tx finished (the connection is back in the pool). Once it was taken, a
  // COMMIT whose connection breaks is CommitOutcomeUnknown unless the
  // transaction's last produced message is found: a ROLLBACK TO SAVEPOINT
  // sent on it may have undone that message, so its absence proves nothing.
  pg_conn* native_handle() const;

 private:
  friend class detail::TxGate;

  explicit Tx(std::unique_ptr<detail::TxState> state);
  detail::TxState& state() const;

  std::unique_ptr<detail::TxState> state_;
};

}  // namespace compaction
