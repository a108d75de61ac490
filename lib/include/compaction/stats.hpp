// Topic observability: headless-row count and age, and the janitor's state.
#pragma once

#include <chrono>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

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
  // Every headless row is counted: an exact figure, whatever it costs.
  static constexpr std::int64_t kCountAll =
      std::numeric_limits<std::int64_t>::max() - 1;

  // Headless rows are counted exactly up to this many; above it the count
  // stops and headless_rows is an estimate (headless_rows_estimated). Bounds
  // the cost of a stats call at about this many index entries read, however
  // large the backlog: an exact count of 1,000,000 rows takes 100-200 ms on
  // 2 cores, a limit of 10,000 keeps it near 20 ms (measured, PostgreSQL
  // 15). Must be in 1..kCountAll, else
  // InvalidArgument (before any I/O).
  std::int64_t exact_count_limit = kCountAll;
};

// One consumer of a topic (all its partitions), for the stats.
struct ConsumerLag {
  std::string consumer;
  int partitions = 0;
  // Committed messages it has not consumed: exact up to the stats'
  // exact_count_limit per partition; lag_messages_capped when a partition
  // reached it (the true figure is that or higher: "at least").
  std::int64_t lag_messages = 0;
  bool lag_messages_capped = false;
  // Age of the oldest committed message it has not consumed (of those
  // counted); 0 when caught up.
  std::chrono::milliseconds lag{0};
  std::optional<JanitorState::TimePoint> last_poll_at;
  bool inactive = false;  // last Poll past consumer_inactive_after
};

struct TopicStats {
  // Exact when headless_rows_estimated is false. Otherwise there are more
  // than exact_count_limit headless rows and this is an estimate of how
  // many, never below exact_count_limit + 1 nor above the head table's
  // estimated size: the planner's density of the idle_since index (or of
  // the head table times its headless fraction) scaled to the current size,
  // as fresh as the head table's last (auto)ANALYZE.
  std::int64_t headless_rows = 0;
  // Exact in both cases (one descent of the idle_since index).
  std::chrono::milliseconds oldest_headless_age{0};  // 0 when none
  // Planner estimate of all head rows (pg_class.reltuples): cheap, not exact.
  std::int64_t estimated_head_rows = 0;
  JanitorState janitor;
  bool headless_rows_estimated = false;  // see headless_rows
  // Headless rows whose idle_since no server clock wrote: infinite, or more
  // than an hour ahead of the server's clock (planted by hand or by a role
  // with write access). The oldest age skips them and the janitor never
  // expires them (their TTL never runs out): delete them by hand.
  std::int64_t invalid_timestamp_rows = 0;

  // The log and its cleaner (Janitor::CompactLog).
  // Planner estimate of the messages in the log: the message table's tuple
  // density at its last (auto)ANALYZE or VACUUM times its current size.
  std::int64_t estimated_messages = 0;
  // Keys whose head is a tombstone, as the cleaner's last pass counted them
  // (at most 100,000 are counted).
  std::int64_t tombstoned_keys = 0;
  // How far behind its retention cutoff the cleaner is: how long ago the
  // oldest removable message (out of retention, not its key's head) past
  // the cleaner's walk fell out of the topic's retention, as its last batch
  // found it, whether that batch was full or not. Found among the 1,000
  // messages past the walk (heads skipped); with none there, or none at
  // all: how long since its last batch minus the retention, a lower bound.
  // 0 when caught up, and always 0 with kKeepForever. A message with a
  // created_at more than an hour ahead of the server's clock (planted) is
  // never due: the cleaner passes and keeps it, and it is not counted here.
  std::chrono::milliseconds cleaner_lag{0};
  // The cleaner's passes; its deleted rows are messages.
  JanitorState cleaner;
  std::int64_t last_tombstones_expired = 0;   // by its last pass
  std::int64_t total_tombstones_expired = 0;  // by every pass
  // The topic's consumers, by name (ListTopicStats only).
  std::vector<ConsumerLag> consumers;
  // Why `consumers` could not be read (ListTopicStats only; empty when they
  // were): the one lag query for every topic failed (past the statement
  // timeout, no privilege). The other figures stand.
  std::string consumers_error;
};

struct TopicOverview {
  TopicInfo info;
  TopicStats stats;
  // Empty, or why this topic's stats could not be read (its tables are
  // missing or altered, its baseline differs, no privilege on them); stats
  // is then all zero. One broken topic never fails the listing.
  std::string error;
};

}  // namespace compaction
