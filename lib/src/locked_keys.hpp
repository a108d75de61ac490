// The keys a transaction locked through LockCompactionHead, and the one
// produce they forbid.
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
