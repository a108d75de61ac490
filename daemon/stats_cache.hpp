// StatsCache: refreshes every topic's headless-row count (exact up to
// stats-exact-count-limit, estimated above it) and oldest age on its own
// timer (one ListTopicStats call: a topic listing plus one statement per
// chunk of topics, each bounded by stats-timeout on the server) and
// publishes them to the MetricsProbe. A scrape reads the probe only, so it
// never waits on the database; between refreshes the values are as of
// compaction_stats_last_refresh_timestamp_seconds.
//
// Lifetime: owned by the App; Stop() before destruction. Thread safety:
// io_context thread only; the refresh itself runs on a worker and reads the
// limit through an atomic, so a reload applies from the next refresh.
#pragma once

#include <atomic>
#include <compaction/options.hpp>
#include <compaction/stats.hpp>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "daemon/periodic.hpp"

namespace compactiond {

class StatsCache {
 public:
  StatsCache(asio::io_context& io, WorkerPool& pool, Database& db,
             MetricsProbe& probe, Millis period,
             std::int64_t exact_count_limit);

  void Start() { job_.Start(); }
  void Stop() { job_.Stop(); }
  void RefreshNow() { job_.Trigger(); }
  // A failed refresh is retried a period later too: the refresh that failed
  // (a stats-timeout on a loaded server, say) is the daemon's heaviest
  // query, and retrying it every second would add to that load.
  void SetPeriod(Millis period) {
    job_.SetPeriod(period);
    job_.SetRetry(period);
  }
  void SetExactCountLimit(std::int64_t limit) { exact_count_limit_ = limit; }

 private:
  void Publish(Outcome<std::vector<compaction::TopicOverview>>& outcome);
  void ForgetInvalidOfGoneTopics(
      const std::vector<compaction::TopicOverview>& topics);
  // Counts and logs the topics whose stats could not be read; a topic is
  // logged when it breaks and when it recovers, not at every refresh.
  void ReportUnreadable(const std::vector<compaction::TopicOverview>& topics);
  void ReportConsumersUnreadable(
      const std::vector<compaction::TopicOverview>& topics);
  void ReportInvalid(const compaction::TopicOverview& t);

  MetricsProbe& probe_;
  std::atomic<std::int64_t> exact_count_limit_;  // before job_: it reads it
  PeriodicJob<std::vector<compaction::TopicOverview>> job_;
  int failures_in_a_row_ = 0;
  std::set<std::string> unreadable_;   // topics whose last refresh failed
  bool consumers_unreadable_ = false;  // the last consumer lag query failed
  // Topics (by id) with invalid_timestamp_rows > 0, and how many.
  std::map<std::int64_t, std::int64_t> invalid_;
};

}  // namespace compactiond
