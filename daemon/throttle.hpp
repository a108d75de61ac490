// WarningThrottle: rate limit for warnings about hostile input (the
// listener's NOTIFY payloads).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>

namespace compactiond {

// Rate limit for warnings about bad input: at most one per `period`.
// Allow() says whether to log now and, if so, how many earlier calls it
// suppressed since the last allowed one.
// Thread safety: none; one owner (the listener thread).
class WarningThrottle {
 public:
  using Clock = std::chrono::steady_clock;

  explicit WarningThrottle(Clock::duration period) : period_(period) {}

  bool Allow(Clock::time_point now, std::uint64_t* suppressed);

 private:
  Clock::duration period_;
  std::optional<Clock::time_point> last_;
  std::uint64_t suppressed_ = 0;
};

}  // namespace compactiond
