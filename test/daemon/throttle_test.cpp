// Unit test of the listener's warning throttle: no database.
#include "daemon/throttle.hpp"

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdint>

namespace compactiond {
namespace {

TEST_CASE("WarningThrottle allows one warning per period and counts the rest",
          "[topic_event]") {
  using namespace std::chrono_literals;
  WarningThrottle throttle(10s);
  WarningThrottle::Clock::time_point t0{};
  std::uint64_t suppressed = 99;
  CHECK(throttle.Allow(t0, &suppressed));
  CHECK(suppressed == 0);
  CHECK_FALSE(throttle.Allow(t0 + 1s, &suppressed));
  CHECK_FALSE(throttle.Allow(t0 + 9s, &suppressed));
  CHECK(throttle.Allow(t0 + 10s, &suppressed));
  CHECK(suppressed == 2);
  CHECK(throttle.Allow(t0 + 30s, &suppressed));
  CHECK(suppressed == 0);
}

}  // namespace
}  // namespace compactiond
