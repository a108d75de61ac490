// Pacing of a sweep's batches: the option bounds, the pause after a full
// batch and how long a claim must last to cover it. Pure functions, no
// database, shared by every sweep kind.
#pragma once

#include <chrono>

#include "compaction/janitor.hpp"

namespace compaction::sweep {

using compaction::kMaxBatchPause;  // public: janitor.hpp

// Throws InvalidArgument naming `operation` and the field when an option is
// out of bounds.
void ValidateOptions(const char* operation, const SweepOptions& options);

// claim_ttl + extra, saturating: claim_ttl itself has no upper bound.
std::chrono::milliseconds ClaimCovering(std::chrono::milliseconds claim_ttl,
                                        std::chrono::milliseconds extra);

// The pause after a full batch that took `busy`: batch_pause, or longer when
// duty_cycle limits the sweep's share of time spent in batches (at most
// kMaxBatchPause and claim_ttl).
std::chrono::milliseconds PauseAfter(const SweepOptions& options,
                                     std::chrono::steady_clock::duration busy);

}  // namespace compaction::sweep
