#include "sweep/pacing.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "compaction/errors.hpp"
#include "validate.hpp"

namespace compaction::sweep {

void ValidateOptions(const char* op, const SweepOptions& o) {
  if (o.batch_size <= 0) {
    throw InvalidArgument(
        op, "batch_size must be positive, got " + std::to_string(o.batch_size));
  }
  if (o.max_batches <= 0) {
    throw InvalidArgument(op, "max_batches must be positive, got " +
                                  std::to_string(o.max_batches));
  }
  detail::ValidateServerTimeout(op, "statement_timeout", o.statement_timeout);
  detail::ValidateTtl(op, "claim_ttl", o.claim_ttl);
  if (o.batch_pause.count() < 0 || o.batch_pause > kMaxBatchPause) {
    throw InvalidArgument(op, "batch_pause must be in 0.." +
                                  std::to_string(kMaxBatchPause.count()) +
                                  " ms, got " +
                                  std::to_string(o.batch_pause.count()));
  }
  if (!(o.duty_cycle > 0.0 && o.duty_cycle <= 1.0)) {
    throw InvalidArgument(op, "duty_cycle must be in (0, 1], got " +
                                  std::to_string(o.duty_cycle));
  }
  if (o.batch_pause.count() > 0 && o.batch_pause >= o.claim_ttl) {
    throw InvalidArgument(op, "batch_pause (" +
                                  std::to_string(o.batch_pause.count()) +
                                  " ms) must be shorter than claim_ttl (" +
                                  std::to_string(o.claim_ttl.count()) + " ms)");
  }
}

std::chrono::milliseconds ClaimCovering(std::chrono::milliseconds claim_ttl,
                                        std::chrono::milliseconds extra) {
  return claim_ttl > std::chrono::milliseconds::max() - extra
             ? claim_ttl
             : claim_ttl + extra;
}

std::chrono::milliseconds PauseAfter(const SweepOptions& o,
                                     std::chrono::steady_clock::duration busy) {
  if (o.duty_cycle >= 1.0) return o.batch_pause;
  const double idle_ms =
      std::chrono::duration<double, std::milli>(busy).count() *
      (1.0 - o.duty_cycle) / o.duty_cycle;
  const double cap_ms =
      static_cast<double>(std::min(kMaxBatchPause, o.claim_ttl).count());
  const std::chrono::milliseconds idle(std::llround(std::min(idle_ms, cap_ms)));
  return std::max(idle, o.batch_pause);
}

}  // namespace compaction::sweep
