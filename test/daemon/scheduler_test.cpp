// Unit tests of the schedule: each job's interval from a topic's settings.
#include "daemon/scheduler.hpp"

#include <catch2/catch.hpp>
#include <chrono>
#include <compaction/options.hpp>

#include "daemon/config.hpp"

namespace compactiond {
namespace {

using std::chrono::milliseconds;

TEST_CASE("sweep interval is ttl/2 clamped to [min, max]") {
  Settings s;
  s.min_interval = milliseconds(1000);
  s.max_interval = milliseconds(300'000);
  ScheduleSettings schedule = ScheduleSettings::From(s);
  CHECK(schedule.IntervalFor(milliseconds(1000)) == milliseconds(1000));
  CHECK(schedule.IntervalFor(milliseconds(60'000)) == milliseconds(30'000));
  CHECK(schedule.IntervalFor(std::chrono::hours(1)) == milliseconds(300'000));
}

TEST_CASE("cleaner interval is the shorter retention/2 clamped") {
  const compactiond::ScheduleSettings s =
      compactiond::ScheduleSettings::From(Settings{});
  // The cleaner's interval follows the shorter retention; none when both
  // keep forever.
  compaction::TopicInfo topic;
  topic.retention = std::chrono::hours(24 * 7);
  topic.tombstone_retention = std::chrono::seconds(4);
  CHECK(s.CleanerIntervalFor(topic) == std::chrono::seconds(2));
  topic.tombstone_retention = std::chrono::hours(24);
  CHECK(s.CleanerIntervalFor(topic) == std::chrono::minutes(5));
  topic.retention = std::chrono::milliseconds(0);
  CHECK(s.CleanerIntervalFor(topic) == std::chrono::seconds(1));
  topic.retention = compaction::kKeepForever;
  topic.tombstone_retention = compaction::kKeepForever;
  CHECK(s.CleanerIntervalFor(topic).count() == 0);
}

}  // namespace
}  // namespace compactiond
