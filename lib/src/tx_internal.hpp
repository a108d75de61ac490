#pragma once

#include "compaction/tx.hpp"
#include "core.hpp"

namespace compaction::detail {
// BEGIN on a pooled connection; the returned Tx owns it.
Tx BeginTx(ClientCore& core);
}  // namespace compaction::detail
