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

struct StatsOptions {
  // Headless rows are counted exactly up to this many; above it the count
  // stops and headless_rows is an estimate (headless_rows_estimated). Bounds
  // the cost of a stats call at about this many index entries read, however
  // large the backlog. Must be in 1..INT64_MAX-1, else InvalidArgument
  // (before any I/O). The default keeps a call near 20 ms on a million
  // freshly inserted headless rows, whose index entries still send the scan
  // to the heap (test/bench/RESULTS.md, Stats).
  std::int64_t exact_count_limit = 10000;
};

struct TopicStats {
  // Exact when headless_rows_estimated is false. Otherwise there are more
  // than exact_count_limit headless rows and this is an estimate of how
  // many, never below exact_count_limit + 1: the planner's density of the
  // idle_since index (or of the head table times its headless fraction)
  // scaled to the current size, as fresh as the head table's last
  // (auto)ANALYZE; exact_count_limit + 1 when it has none.
  std::int64_t headless_rows = 0;
  bool headless_rows_estimated = false;
  // Exact in both cases (one descent of the idle_since index).
  std::chrono::milliseconds oldest_headless_age{0};  // 0 when none
  // Planner estimate of all head rows (pg_class.reltuples): cheap, not exact.
  std::int64_t estimated_head_rows = 0;
  JanitorState janitor;
};

struct TopicOverview {
  TopicInfo info;
  TopicStats stats;
};

namespace detail {
class ClientCore;
// TopicHandle<M>::Stats(options); see detail/core.hpp for its siblings.
TopicStats GetTopicStats(ClientCore& core, const std::string& topic,
                         const StatsOptions& options);
}  // namespace detail

}  // namespace compaction
