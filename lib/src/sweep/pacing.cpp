#include "sweep/pacing.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "compaction/errors.hpp"
#include "validate.hpp"

namespace compaction::sweep {

void ValidateOptions(const char* op, const SweepOptions& o) {
  if (const auto error = CheckSweepOptions(o)) {
    throw InvalidArgument(op, error->field + " " + error->message);
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

namespace compaction {

std::optional<SweepOptionsError> CheckSweepOptions(const SweepOptions& o) {
  const auto error = [](std::string field, std::string message) {
    return SweepOptionsError{std::move(field), std::move(message)};
  };
  if (o.batch_size <= 0) {
    return error("batch_size",
                 "must be positive, got " + std::to_string(o.batch_size));
  }
  if (o.max_batches <= 0) {
    return error("max_batches",
                 "must be positive, got " + std::to_string(o.max_batches));
  }
  if (std::string p = detail::ServerTimeoutProblem(o.statement_timeout);
      !p.empty()) {
    return error("statement_timeout", std::move(p));
  }
  if (std::string p = detail::TtlProblem(o.claim_ttl); !p.empty()) {
    return error("claim_ttl", std::move(p));
  }
  if (o.batch_pause.count() < 0 || o.batch_pause > kMaxBatchPause) {
    return error("batch_pause",
                 "must be in 0.." + std::to_string(kMaxBatchPause.count()) +
                     " ms, got " + std::to_string(o.batch_pause.count()));
  }
  if (!(o.duty_cycle > 0.0 && o.duty_cycle <= 1.0)) {
    return error("duty_cycle",
                 "must be in (0, 1], got " + std::to_string(o.duty_cycle));
  }
  if (o.batch_pause.count() > 0 && o.batch_pause >= o.claim_ttl) {
    return error("batch_pause", "(" + std::to_string(o.batch_pause.count()) +
                                    " ms) must be shorter than claim_ttl (" +
                                    std::to_string(o.claim_ttl.count()) +
                                    " ms)");
  }
  return std::nullopt;
}

}  // namespace compaction
