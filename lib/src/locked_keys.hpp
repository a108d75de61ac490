// The keys a transaction locked through LockCompactionHead, and the one
// produce they forbid.
//
// Kept for the life of the Tx: the caller's own savepoints are SQL on
// native_handle() that the library never sees, so a key whose lock a
// ROLLBACK TO SAVEPOINT released stays remembered (the refusal errs on
// the safe side; topic.hpp and doc/library.md say so). A lock that fails
// (LockTimeout, inside the library's own savepoint) is never remembered.
#pragma once

#include <cstdint>

#include "compaction/options.hpp"
#include "core.hpp"

namespace compaction::detail {

// InvalidArgument, before anything is written, for a keyed produce without
// compaction to a key `state` holds through LockCompactionHead: such a
// message never moves the key's head, so the locked read-modify-write
// would silently lose its update (and leave a headless row behind).
void RefuseUncompactedLockedKey(const TxState& state, std::int64_t topic_id,
                                const ProduceOptions& options);

}  // namespace compaction::detail
