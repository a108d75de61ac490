// The per-consumer series of MetricsProbe (daemon/metrics.cpp): one set per
// topic and consumer, whatever metrics-per-topic says (consumers are few,
// and an operator needs to see which one lags). Internal to metrics.cpp.
#pragma once

#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include <chrono>
#include <compaction/stats.hpp>
#include <map>
#include <string>
#include <vector>

namespace compactiond::metrics_internal {

struct ConsumerFamilies {
  prometheus::Family<prometheus::Gauge>& lag_messages;
  prometheus::Family<prometheus::Gauge>& lag_seconds;
  prometheus::Family<prometheus::Gauge>& last_poll;
  prometheus::Family<prometheus::Gauge>& inactive;
  prometheus::Family<prometheus::Gauge>& holding_back;
  prometheus::Family<prometheus::Gauge>& lag_unreadable;

  explicit ConsumerFamilies(prometheus::Registry& r)
      : lag_messages(
            prometheus::BuildGauge()
                .Name("compaction_consumer_lag_messages")
                .Help("Committed messages the consumer has not consumed, as "
                      "of the last statistics refresh; exact up to "
                      "stats-exact-count-limit per partition, that limit "
                      "per partition above it.")
                .Register(r)),
        lag_seconds(prometheus::BuildGauge()
                        .Name("compaction_consumer_lag_seconds")
                        .Help("Age of the oldest committed message the "
                              "consumer has not consumed (0: caught up), "
                              "as of the last statistics refresh.")
                        .Register(r)),
        last_poll(prometheus::BuildGauge()
                      .Name("compaction_consumer_last_poll_timestamp_seconds")
                      .Help("Unix time of the consumer's last Poll on any "
                            "partition.")
                      .Register(r)),
        inactive(prometheus::BuildGauge()
                     .Name("compaction_consumer_inactive")
                     .Help("1 when the consumer's last Poll is older than "
                           "the topic's consumer_inactive_after (it no "
                           "longer holds back the log cleaner), else 0.")
                     .Register(r)),
        holding_back(
            prometheus::BuildGauge()
                .Name("compaction_consumer_holding_back")
                .Help("1 when the consumer is active and the oldest message "
                      "it has not consumed is older than the topic's "
                      "shorter retention (retention or tombstone_retention): "
                      "the log cleaner keeps tombstones and unkeyed or "
                      "uncompacted messages past their retention until it "
                      "consumes them; else 0.")
                .Register(r)),
        lag_unreadable(
            prometheus::BuildGauge()
                .Name("compaction_consumer_lag_unreadable")
                .Help("1 when the last statistics refresh could not read the "
                      "lag of the topic's consumers (their "
                      "compaction_consumer_* series are then withdrawn, not "
                      "left at stale values), else 0.")
                .Register(r)) {}
};

struct ConsumerSeries {
  prometheus::Gauge* lag_messages;
  prometheus::Gauge* lag_seconds;
  prometheus::Gauge* last_poll;
  prometheus::Gauge* inactive;
  prometheus::Gauge* holding_back;

  void Remove(ConsumerFamilies& f) const {
    f.lag_messages.Remove(lag_messages);
    f.lag_seconds.Remove(lag_seconds);
    f.last_poll.Remove(last_poll);
    f.inactive.Remove(inactive);
    f.holding_back.Remove(holding_back);
  }
};

// A topic's consumers: series appear with a consumer and go with it, or
// with a lag query that failed (an absent series is unknown to Prometheus;
// a stale low lag would keep CompactionConsumerLagging silent), while
// `unreadable` says why they are gone.
struct ConsumerMap {
  std::map<std::string, ConsumerSeries> series;
  prometheus::Gauge* unreadable = nullptr;

  static ConsumerMap Add(ConsumerFamilies& f, const std::string& topic) {
    ConsumerMap m;
    m.unreadable = &f.lag_unreadable.Add({{"topic", topic}});
    return m;
  }
};

// `hold_after`: the topic's shorter retention in seconds (+Inf when it keeps
// its log forever); a consumer lagging more keeps the cleaner from expiring
// what it has not consumed.
inline void SetConsumers(ConsumerFamilies& f, ConsumerMap& map,
                         const std::string& topic,
                         const std::vector<compaction::ConsumerLag>& now,
                         double hold_after) {
  std::map<std::string, ConsumerSeries>& series = map.series;
  std::map<std::string, ConsumerSeries> next;
  for (const compaction::ConsumerLag& c : now) {
    auto it = series.find(c.consumer);
    ConsumerSeries s;
    if (it != series.end()) {
      s = it->second;
      series.erase(it);
    } else {
      const prometheus::Labels labels{{"topic", topic},
                                      {"consumer", c.consumer}};
      s = ConsumerSeries{&f.lag_messages.Add(labels),
                         &f.lag_seconds.Add(labels), &f.last_poll.Add(labels),
                         &f.inactive.Add(labels), &f.holding_back.Add(labels)};
    }
    s.lag_messages->Set(static_cast<double>(c.lag_messages));
    s.lag_seconds->Set(std::chrono::duration<double>(c.lag).count());
    s.last_poll->Set(c.last_poll_at ? std::chrono::duration<double>(
                                          c.last_poll_at->time_since_epoch())
                                          .count()
                                    : 0);
    s.inactive->Set(c.inactive ? 1 : 0);
    const double lag = std::chrono::duration<double>(c.lag).count();
    s.holding_back->Set(!c.inactive && lag > hold_after ? 1 : 0);
    next.emplace(c.consumer, s);
  }
  for (const auto& [name, s] : series) s.Remove(f);
  series = std::move(next);
  map.unreadable->Set(0);
}

// The lag query failed: the series go until it reads again.
inline void ConsumersUnreadable(ConsumerFamilies& f, ConsumerMap& map) {
  for (const auto& [name, s] : map.series) s.Remove(f);
  map.series.clear();
  map.unreadable->Set(1);
}

inline void RemoveConsumers(ConsumerFamilies& f, ConsumerMap& map) {
  for (const auto& [name, s] : map.series) s.Remove(f);
  map.series.clear();
  f.lag_unreadable.Remove(map.unreadable);
}

}  // namespace compactiond::metrics_internal
