// Topic observability: headless-row count and age, and the janitor's state.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "compaction/options.hpp"

namespace compaction {

// What the last sweeps of one topic did (table janitor_state).
struct JanitorState {
  using TimePoint = std::chrono::system_clock::time_point;
  std::optional<TimePoint> last_sweep_started_at;
  std::optional<TimePoint> last_sweep_finished_at;
  std::optional<TimePoint> last_success_at;
  std::int64_t last_deleted_rows = 0;
  std::int64_t total_deleted_rows = 0;
  std::string last_error;  // empty after a successful sweep
  std::string claimed_by;  // holder of a live claim, empty when none
  std::optional<TimePoint> claimed_until;
};

struct TopicStats {
  std::int64_t headless_rows = 0;
  std::chrono::milliseconds oldest_headless_age{0};  // 0 when none
  // Planner estimate of all head rows (pg_class.reltuples): cheap, not exact.
  std::int64_t estimated_head_rows = 0;
  JanitorState janitor;
};

struct TopicOverview {
  TopicInfo info;
  TopicStats stats;
};

}  // namespace compaction
