#pragma once

#include "compaction/tx.hpp"
#include "core.hpp"

namespace compaction::detail {
// A transaction on a pooled connection; the returned Tx owns it (its BEGIN
// goes out with its first statement).
Tx BeginTx(ClientCore& core);
// The connection broke with COMMIT sent: finds out on a new connection
// (commit_outcome.hpp) whether `st` committed, looking for the message it
// wrote last, and finishes it accordingly; throws unless it committed.
void ResolveTxCommit(TxState& st, const char* operation);
}  // namespace compaction::detail
