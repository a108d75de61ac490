#include "daemon/stats_cache.hpp"

#include "daemon/failure.hpp"
#include "daemon/log.hpp"

namespace compactiond {

StatsCache::StatsCache(asio::io_context& io, WorkerPool& pool, Database& db,
                       MetricsProbe& probe, Millis period,
                       std::int64_t exact_count_limit)
    : probe_(probe),
      exact_count_limit_(exact_count_limit),
      job_(
          io, pool, db, period,
          [this](compaction::Client& client) {
            compaction::StatsOptions options;
            options.exact_count_limit = exact_count_limit_;
            return client.ListTopicStats(options);
          },
          [this](Outcome<std::vector<compaction::TopicOverview>>& outcome,
                 const std::shared_ptr<compaction::Client>&) {
            Publish(outcome);
          }) {
  job_.SetRetry(period);
}

void StatsCache::Publish(
    Outcome<std::vector<compaction::TopicOverview>>& outcome) {
  if (!outcome.ok()) {
    probe_.StatsRefreshFailed();
    // One line per outage, not one per refresh.
    if (failures_in_a_row_++ == 0) {
      LogWarn("stats", "refresh failed", {{"error", Describe(outcome.error)}});
    }
    return;
  }
  if (failures_in_a_row_ > 0) {
    LogInfo("stats", "refresh recovered", {{"failures", failures_in_a_row_}});
  }
  failures_in_a_row_ = 0;
  ReportUnreadable(*outcome.value);
  ReportConsumersUnreadable(*outcome.value);
  for (const compaction::TopicOverview& t : *outcome.value) {
    // Series exist only for topics the scheduler knows, so a topic destroyed
    // between the two queries does not come back.
    if (!probe_.HasTopic(t.info.name)) continue;
    // The consumers' lag is read apart from the topic's own figures, so it
    // is published even when those are unreadable: left at its last value
    // it would keep the lag alerts quiet. Unread, its series go.
    if (t.stats.consumers_error.empty()) {
      probe_.SetConsumers(t.info.name, t.stats.consumers);
    } else {
      probe_.ConsumersUnreadable(t.info.name);
    }
    // Unreadable figures keep their last values; the topic is counted in
    // compaction_stats_unreadable_topics and logged (ReportUnreadable).
    if (!t.error.empty()) continue;
    probe_.SetHeadless(t.info.name, t.stats.headless_rows,
                       t.stats.headless_rows_estimated,
                       t.stats.oldest_headless_age);
    probe_.SetLog(t.info.name, t.stats.estimated_messages,
                  t.stats.tombstoned_keys, t.stats.cleaner_lag);
    probe_.SetInvalidTimestampRows(t.info.name, t.stats.invalid_timestamp_rows);
    ReportInvalid(t);
  }
  ForgetInvalidOfGoneTopics(*outcome.value);
  probe_.StatsRefreshed();
}

// Logged when a topic's count of planted timestamps changes, not on every
// refresh.
void StatsCache::ReportInvalid(const compaction::TopicOverview& t) {
  const std::int64_t rows = t.stats.invalid_timestamp_rows;
  auto it = invalid_.find(t.info.id);
  const std::int64_t before = it == invalid_.end() ? 0 : it->second;
  if (rows == before) return;
  if (rows == 0) {
    invalid_.erase(it);
    LogInfo("stats", "no more rows with invalid timestamps",
            {{"topic", t.info.name}});
    return;
  }
  invalid_[t.info.id] = rows;
  LogWarn("stats",
          "headless rows with invalid timestamps (never expire; delete them "
          "by hand)",
          {{"topic", t.info.name}, {"rows", rows}});
}

// A topic destroyed while it had such rows leaves the listing without a
// last report: its entry goes with it, so the map holds only listed
// topics. (Entries are by id: a topic re-created under the name, even
// between two refreshes, is another topic and starts afresh.)
void StatsCache::ForgetInvalidOfGoneTopics(
    const std::vector<compaction::TopicOverview>& topics) {
  std::set<std::int64_t> listed;
  for (const compaction::TopicOverview& t : topics) listed.insert(t.info.id);
  std::erase_if(invalid_, [&](const auto& entry) {
    return listed.count(entry.first) == 0;
  });
}

void StatsCache::ReportUnreadable(
    const std::vector<compaction::TopicOverview>& topics) {
  std::set<std::string> now;
  for (const compaction::TopicOverview& t : topics) {
    if (t.error.empty()) continue;
    now.insert(t.info.name);
    if (unreadable_.count(t.info.name) == 0) {
      LogWarn("stats", "topic statistics unreadable",
              {{"topic", t.info.name}, {"error", t.error}});
    }
  }
  for (const std::string& name : unreadable_) {
    if (now.count(name) == 0) {
      LogInfo("stats", "topic statistics readable again", {{"topic", name}});
    }
  }
  unreadable_ = std::move(now);
  probe_.SetStatsUnreadable(static_cast<std::int64_t>(unreadable_.size()));
}

// Logged when the consumers' lag turns unreadable and when it is read again.
void StatsCache::ReportConsumersUnreadable(
    const std::vector<compaction::TopicOverview>& topics) {
  std::string error;
  for (const compaction::TopicOverview& t : topics) {
    if (!t.stats.consumers_error.empty()) error = t.stats.consumers_error;
  }
  if (!error.empty() && !consumers_unreadable_) {
    LogWarn("stats",
            "consumer lag unreadable; the consumer series are withdrawn "
            "until it reads again",
            {{"error", error}});
  } else if (error.empty() && consumers_unreadable_) {
    LogInfo("stats", "consumer lag readable again", {});
  }
  consumers_unreadable_ = !error.empty();
}

}  // namespace compactiond
