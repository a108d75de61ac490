#include "daemon/throttle.hpp"

namespace compactiond {

bool WarningThrottle::Allow(Clock::time_point now, std::uint64_t* suppressed) {
  if (last_ && now - *last_ < period_) {
    ++suppressed_;
    return false;
  }
  last_ = now;
  if (suppressed != nullptr) *suppressed = suppressed_;
  suppressed_ = 0;
  return true;
}

}  // namespace compactiond
