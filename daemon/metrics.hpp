// MetricsProbe: the only code that touches prometheus-cpp. Everything else
// reports through these typed methods, so metric names, HELP texts and
// labels live in one file (label `topic` only, never a message key).
//
// Lifetime: owned by the App for the whole run. Thread safety: every method
// may be called from any thread (prometheus-cpp metrics are atomic; the
// per-topic series table is guarded by a mutex).
#pragma once

#include <chrono>
#include <compaction/janitor.hpp>
#include <compaction/options.hpp>
#include <compaction/stats.hpp>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "daemon/job.hpp"

namespace compactiond {

// metrics-per-topic: which series carry the `topic` label. kBasic keeps
// per topic what alerts and an operator's first look need (headless rows
// and oldest age, the TTL, the cleaner lag, the last successes, failures
// of topics that failed) and sums the rest over all topics in one
// unlabelled series per name; kDetail labels every series by topic (about
// 52 lines per topic: 34 MB of text at 10,000 topics).
enum class MetricsDetail { kBasic, kDetail };

class MetricsProbe {
 public:
  MetricsProbe(const std::string& version, MetricsDetail detail);
  ~MetricsProbe();
  MetricsProbe(const MetricsProbe&) = delete;
  MetricsProbe& operator=(const MetricsProbe&) = delete;

  void SetUp(bool up);
  void SetReady(bool ready);
  // Whether topic events arrive over a working LISTEN connection.
  void SetListening(bool listening);

  // Creates the topic's series (idempotent) and sets its TTL and retention
  // gauges.
  void AddTopic(const compaction::TopicInfo& info);
  // Removes every series of a destroyed topic.
  void RemoveTopic(const std::string& topic);
  bool HasTopic(const std::string& topic) const;

  // `estimated`: `rows` is the library's estimate above its exact-count
  // limit (TopicStats::headless_rows_estimated), not an exact count.
  void SetHeadless(const std::string& topic, std::int64_t rows, bool estimated,
                   std::chrono::milliseconds oldest_age);
  // A run of `job` that returned: skipped (another replica held the
  // claim), or finished; complete unless it was cancelled or lost its
  // claim (its rows count, but it is no success).
  void RunFinished(Job job, const std::string& topic,
                   const compaction::CompactResult& result,
                   std::chrono::duration<double> duration);
  // A run of `job` that ended in an error.
  void RunFailed(Job job, const std::string& topic,
                 std::chrono::duration<double> duration);

  // TopicStats::invalid_timestamp_rows from a statistics refresh.
  void SetInvalidTimestampRows(const std::string& topic, std::int64_t rows);
  // The log's figures from a statistics refresh (TopicStats).
  void SetLog(const std::string& topic, std::int64_t messages,
              std::int64_t tombstoned_keys,
              std::chrono::milliseconds cleaner_lag);
  // The topic's consumers as of a statistics refresh; series of consumers
  // no longer listed go.
  void SetConsumers(const std::string& topic,
                    const std::vector<compaction::ConsumerLag>& consumers);
  // The refresh could not read the topic's consumers' lag: their series go
  // and compaction_consumer_lag_unreadable says so, until SetConsumers.
  void ConsumersUnreadable(const std::string& topic);
  void StatsRefreshed();
  void StatsRefreshFailed();
  // How many topics the last refresh could not read (TopicOverview::error).
  void SetStatsUnreadable(std::int64_t topics);

  // The registry in the Prometheus text exposition format.
  std::string Serialize() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace compactiond
