// Unit tests of the duration syntax (500ms, 5m, 1h30m) and its bounds.
#include "daemon/duration.hpp"

#include <catch2/catch.hpp>
#include <chrono>

#include "daemon/config.hpp"
#include "test/daemon/test_support.hpp"

namespace compactiond {
namespace {

using std::chrono::milliseconds;
using test::ErrorOf;

TEST_CASE("durations parse with units and reject garbage") {
  CHECK(ParseDuration("500ms") == milliseconds(500));
  CHECK(ParseDuration("30s") == milliseconds(30'000));
  CHECK(ParseDuration("30") == milliseconds(30'000));
  CHECK(ParseDuration("5m") == milliseconds(300'000));
  CHECK(ParseDuration("1h30m") == milliseconds(5'400'000));
  CHECK(ParseDuration("2d") == milliseconds(172'800'000));
  CHECK_FALSE(ParseDuration(""));
  CHECK_FALSE(ParseDuration("5x"));
  CHECK_FALSE(ParseDuration("-1s"));
  CHECK_FALSE(ParseDuration("1.5s"));
  CHECK_FALSE(ParseDuration("1h30"));
  CHECK(FormatDuration(milliseconds(90'000)) == "90s");
  CHECK(FormatDuration(milliseconds(300'000)) == "5m");
  CHECK(FormatDuration(milliseconds(1500)) == "1500ms");
}

TEST_CASE("durations beyond 64-bit milliseconds are refused") {
  // Numbers beyond 64-bit milliseconds are refused, never wrapped.
  for (const char* huge : {"9999999999999999999d", "9223372036854775807ms",
                           "106751991168d", "106751991167d106751991167d"}) {
    INFO(huge);
    CHECK_FALSE(ParseDuration(huge));
    CHECK_THAT(ErrorOf({"--claim-ttl", huge}), Catch::Contains("'claim-ttl'"));
  }
  CHECK(ParseDuration("106751991167d") ==
        milliseconds(106751991167LL * 86'400'000));
}

}  // namespace
}  // namespace compactiond
