// The sweep's pacing math and option bounds, without a database (the live
// tests in test/pg/janitor_test.cpp show the pauses happen).
#include <catch2/catch.hpp>
#include <chrono>
#include <limits>

#include "compaction/errors.hpp"
#include "compaction/options.hpp"
#include "sweep/pacing.hpp"

using compaction::InvalidArgument;
using compaction::SweepOptions;
using compaction::sweep::ClaimCovering;
using compaction::sweep::kMaxBatchPause;
using compaction::sweep::PauseAfter;
using compaction::sweep::ValidateOptions;
using namespace std::chrono_literals;

namespace {

SweepOptions Paced(std::chrono::milliseconds batch_pause, double duty_cycle) {
  SweepOptions o;
  o.batch_pause = batch_pause;
  o.duty_cycle = duty_cycle;
  return o;
}

}  // namespace

TEST_CASE(
    "a duty cycle of 1 pauses exactly batch_pause, however long the batch") {
  CHECK(PauseAfter(Paced(0ms, 1.0), 10s) == 0ms);
  CHECK(PauseAfter(Paced(250ms, 1.0), 0ms) == 250ms);
  CHECK(PauseAfter(Paced(250ms, 1.0), 1h) == 250ms);
}

TEST_CASE("below 1, the pause is busy * (1 - duty) / duty") {
  CHECK(PauseAfter(Paced(0ms, 0.5), 100ms) == 100ms);
  CHECK(PauseAfter(Paced(0ms, 0.2), 400ms) == 1600ms);
  CHECK(PauseAfter(Paced(0ms, 0.25), 3ms) == 9ms);
  CHECK(PauseAfter(Paced(0ms, 0.1), 2s) == 18s);
  // The busy time is measured finer than a millisecond; the pause rounds.
  CHECK(PauseAfter(Paced(0ms, 0.5), 1400us) == 1ms);
  CHECK(PauseAfter(Paced(0ms, 0.5), 1600us) == 2ms);
  CHECK(PauseAfter(Paced(0ms, 0.5), 0ms) == 0ms);
}

TEST_CASE("the duty cycle pause is never shorter than batch_pause") {
  CHECK(PauseAfter(Paced(50ms, 0.5), 10ms) == 50ms);
  CHECK(PauseAfter(Paced(50ms, 0.5), 0ms) == 50ms);
  CHECK(PauseAfter(Paced(50ms, 0.5), 80ms) == 80ms);
}

TEST_CASE("the duty cycle pause is capped at kMaxBatchPause and claim_ttl") {
  SweepOptions o = Paced(0ms, 0.01);
  o.claim_ttl = 10min;
  CHECK(kMaxBatchPause == 1min);
  CHECK(PauseAfter(o, 10s) == kMaxBatchPause);  // 990 s uncapped
  // A batch that took hours (or an absurd clock) neither overflows nor
  // exceeds the cap.
  CHECK(PauseAfter(o, 1000h) == kMaxBatchPause);
  CHECK(PauseAfter(o, std::chrono::steady_clock::duration::max()) ==
        kMaxBatchPause);
  // A short claim caps it lower: the pause must not outlast the claim.
  o.claim_ttl = 5s;
  CHECK(PauseAfter(o, 10s) == 5s);
  o.duty_cycle = 0.5;
  CHECK(PauseAfter(o, 3s) == 3s);  // under both caps: unchanged
  CHECK(PauseAfter(Paced(0ms, std::numeric_limits<double>::min()), 1ms) ==
        kMaxBatchPause);
}

TEST_CASE("a claim covers claim_ttl plus the pause, saturating") {
  CHECK(ClaimCovering(60s, 0ms) == 60s);
  CHECK(ClaimCovering(60s, 50s) == 110s);
  constexpr auto kMax = std::chrono::milliseconds::max();
  CHECK(ClaimCovering(kMax, 1ms) == kMax);
  CHECK(ClaimCovering(kMax - 5ms, 5ms) == kMax);
  CHECK(ClaimCovering(kMax - 5ms, 6ms) == kMax - 5ms);
}

TEST_CASE("sweep options are checked, naming the operation and the field") {
  CHECK_NOTHROW(ValidateOptions("Sweep", SweepOptions{}));
  SweepOptions longest = Paced(kMaxBatchPause, 0.001);
  longest.claim_ttl = kMaxBatchPause + 1ms;
  CHECK_NOTHROW(ValidateOptions("Sweep", longest));
  const auto bad = [](auto change) {
    SweepOptions o;
    o.claim_ttl = 2min;
    change(o);
    return o;
  };
  const auto fails = [](const SweepOptions& o, const char* field) {
    CHECK_THROWS_AS(ValidateOptions("Sweep", o), InvalidArgument);
    CHECK_THROWS_WITH(ValidateOptions("Sweep", o), Catch::Contains(field));
    CHECK_THROWS_WITH(ValidateOptions("Sweep", o), Catch::Contains("Sweep"));
  };
  fails(bad([](SweepOptions& o) { o.batch_size = 0; }), "batch_size");
  fails(bad([](SweepOptions& o) { o.batch_size = -1; }), "batch_size");
  fails(bad([](SweepOptions& o) { o.max_batches = 0; }), "max_batches");
  fails(bad([](SweepOptions& o) { o.statement_timeout = 0ms; }),
        "statement_timeout");
  fails(bad([](SweepOptions& o) { o.claim_ttl = 0ms; }), "claim_ttl");
  fails(bad([](SweepOptions& o) { o.claim_ttl = compaction::kMaxTtl + 1ms; }),
        "claim_ttl");
  fails(bad([](SweepOptions& o) { o.batch_pause = -1ms; }), "batch_pause");
  fails(bad([](SweepOptions& o) { o.batch_pause = kMaxBatchPause + 1ms; }),
        "batch_pause");
  fails(bad([](SweepOptions& o) { o.duty_cycle = 0.0; }), "duty_cycle");
  fails(bad([](SweepOptions& o) { o.duty_cycle = 1.0001; }), "duty_cycle");
  fails(bad([](SweepOptions& o) { o.duty_cycle = -0.5; }), "duty_cycle");
  fails(bad([](SweepOptions& o) {
          o.duty_cycle = std::numeric_limits<double>::quiet_NaN();
        }),
        "duty_cycle");
  // A pause as long as the claim would let the claim lapse mid-pause.
  fails(bad([](SweepOptions& o) {
          o.claim_ttl = 30s;
          o.batch_pause = 30s;
        }),
        "shorter than claim_ttl");
}

TEST_CASE("CheckSweepOptions names the field and says what is wrong") {
  CHECK_FALSE(compaction::CheckSweepOptions(SweepOptions{}).has_value());
  SweepOptions o;
  o.duty_cycle = 2.0;
  auto error = compaction::CheckSweepOptions(o);
  REQUIRE(error.has_value());
  CHECK(error->field == "duty_cycle");
  CHECK(error->message == "must be in (0, 1], got 2.000000");
  o = SweepOptions{};
  o.claim_ttl = 30s;
  o.batch_pause = 30s;
  error = compaction::CheckSweepOptions(o);
  REQUIRE(error.has_value());
  CHECK(error->field == "batch_pause");
  CHECK(error->message ==
        "(30000 ms) must be shorter than claim_ttl (30000 ms)");
  o = SweepOptions{};
  o.statement_timeout = 0ms;
  error = compaction::CheckSweepOptions(o);
  REQUIRE(error.has_value());
  CHECK(error->field == "statement_timeout");
  CHECK(error->message.starts_with("must be in 1.."));
}
