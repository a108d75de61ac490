#include "daemon/metrics.hpp"

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <algorithm>
#include <limits>
#include <map>
#include <mutex>
#include <sstream>

#include "daemon/metrics_consumers.hpp"
#include "daemon/metrics_series.hpp"

namespace compactiond {
namespace {

using metrics_internal::ConsumerFamilies;
using metrics_internal::ConsumerMap;
using metrics_internal::DurationBuckets;
using metrics_internal::GaugePart;
using metrics_internal::RetentionSeconds;
using metrics_internal::RunFamilies;
using metrics_internal::RunSeries;
using metrics_internal::UnixNow;

// Metric names of the log cleaner's runs, next to the sweep's.
RunFamilies CleanerFamilies(prometheus::Registry& registry) {
  return RunFamilies{
      prometheus::BuildCounter()
          .Name("compaction_cleaner_deleted_messages_total")
          .Help("Messages the log cleaner of this daemon deleted "
                "(superseded or out of retention, expired tombstones).")
          .Register(registry),
      prometheus::BuildCounter()
          .Name("compaction_cleaner_runs_total")
          .Help("Log cleaner passes run by this daemon, failed ones "
                "included, skipped ones not.")
          .Register(registry),
      prometheus::BuildCounter()
          .Name("compaction_cleaner_run_failures_total")
          .Help("Log cleaner passes that ended in an error.")
          .Register(registry),
      prometheus::BuildCounter()
          .Name("compaction_cleaner_runs_skipped_total")
          .Help("Log cleaner passes skipped because another replica held "
                "the topic's cleaner claim.")
          .Register(registry),
      prometheus::BuildHistogram()
          .Name("compaction_cleaner_run_duration_seconds")
          .Help("Wall-clock duration of log cleaner passes run by this "
                "daemon.")
          .Register(registry),
      prometheus::BuildGauge()
          .Name("compaction_cleaner_last_success_timestamp_seconds")
          .Help("Unix time of the topic's last successful log cleaner pass "
                "by this daemon (0: none yet).")
          .Register(registry)};
}

}  // namespace

struct MetricsProbe::Impl {
  struct TopicSeries {
    prometheus::Gauge* headless_rows;
    GaugePart headless_estimated;
    prometheus::Gauge* oldest_age;
    prometheus::Gauge* ttl;
    RunSeries sweep;
    prometheus::Gauge* retention;            // null: basic
    prometheus::Gauge* tombstone_retention;  // null: basic
    GaugePart log_messages;
    GaugePart tombstoned_keys;
    prometheus::Gauge* cleaner_lag;
    prometheus::Counter* tombstones_expired;  // shared: basic
    RunSeries cleaner;
    GaugePart invalid_rows;
    ConsumerMap consumers;
    double hold_after = std::numeric_limits<double>::infinity();
  };

  Impl(const std::string& version, MetricsDetail per_topic)
      : detail(per_topic == MetricsDetail::kDetail),
        registry(std::make_shared<prometheus::Registry>()),
        up(prometheus::BuildGauge()
               .Name("compaction_up")
               .Help("Whether the database is reachable (1) or not (0).")
               .Register(*registry)
               .Add({})),
        ready(prometheus::BuildGauge()
                  .Name("compaction_ready")
                  .Help("Whether topics are loaded and the database is "
                        "reachable (1) or not (0).")
                  .Register(*registry)
                  .Add({})),
        listening(prometheus::BuildGauge()
                      .Name("compaction_topic_events_listening")
                      .Help("Whether topic changes arrive over LISTEN (1) or "
                            "only by polling the topic list (0).")
                      .Register(*registry)
                      .Add({})),
        topics(prometheus::BuildGauge()
                   .Name("compaction_topics")
                   .Help("Number of topics known to the daemon.")
                   .Register(*registry)
                   .Add({})),
        headless_rows(prometheus::BuildGauge()
                          .Name("compaction_headless_rows")
                          .Help("Headless rows in the topic's compaction-head "
                                "table, as of the last statistics refresh; "
                                "an estimate when "
                                "compaction_headless_rows_estimated is 1.")
                          .Register(*registry)),
        headless_estimated(
            prometheus::BuildGauge()
                .Name("compaction_headless_rows_estimated")
                .Help("Whether compaction_headless_rows is an estimate (1: "
                      "more headless rows than the exact-count limit) or "
                      "an exact count (0); with metrics-per-topic = basic, "
                      "unlabelled: how many topics' counts are estimates.")
                .Register(*registry)),
        oldest_age(prometheus::BuildGauge()
                       .Name("compaction_headless_oldest_age_seconds")
                       .Help("Age of the oldest headless row (0 when none), "
                             "as of the last statistics refresh.")
                       .Register(*registry)),
        ttl(prometheus::BuildGauge()
                .Name("compaction_topic_headless_ttl_seconds")
                .Help("Headless-row TTL configured for the topic.")
                .Register(*registry)),
        sweep{prometheus::BuildCounter()
                  .Name("compaction_janitor_deleted_rows_total")
                  .Help("Expired headless rows deleted by this daemon.")
                  .Register(*registry),
              prometheus::BuildCounter()
                  .Name("compaction_janitor_sweeps_total")
                  .Help("Sweeps run by this daemon, failed ones included, "
                        "skipped ones not.")
                  .Register(*registry),
              prometheus::BuildCounter()
                  .Name("compaction_janitor_sweep_failures_total")
                  .Help("Sweeps that ended in an error.")
                  .Register(*registry),
              prometheus::BuildCounter()
                  .Name("compaction_janitor_sweeps_skipped_total")
                  .Help("Sweeps skipped because another replica held the "
                        "topic's claim.")
                  .Register(*registry),
              prometheus::BuildHistogram()
                  .Name("compaction_janitor_sweep_duration_seconds")
                  .Help("Wall-clock duration of sweeps run by this daemon.")
                  .Register(*registry),
              prometheus::BuildGauge()
                  .Name("compaction_janitor_last_success_timestamp_seconds")
                  .Help("Unix time of the topic's last successful sweep by "
                        "this daemon (0: none yet).")
                  .Register(*registry)},
        retention(prometheus::BuildGauge()
                      .Name("compaction_topic_retention_seconds")
                      .Help("Retention of messages that are not their key's "
                            "head (+Inf: kept forever).")
                      .Register(*registry)),
        tombstone_retention(
            prometheus::BuildGauge()
                .Name("compaction_topic_tombstone_retention_seconds")
                .Help("How long a tombstone head is kept (+Inf: forever).")
                .Register(*registry)),
        log_messages(prometheus::BuildGauge()
                         .Name("compaction_log_messages")
                         .Help("Estimated messages in the topic's log (the "
                               "planner's estimate), as of the last "
                               "statistics refresh (summed over topics with "
                               "metrics-per-topic = basic).")
                         .Register(*registry)),
        tombstoned_keys(prometheus::BuildGauge()
                            .Name("compaction_tombstoned_keys")
                            .Help("Keys whose head is a tombstone, as the "
                                  "log cleaner's last pass counted them "
                                  "(summed over topics with "
                                  "metrics-per-topic = basic).")
                            .Register(*registry)),
        cleaner_lag(prometheus::BuildGauge()
                        .Name("compaction_cleaner_lag_seconds")
                        .Help("How far the log cleaner is behind the topic's "
                              "retention cutoff (0: caught up), as of the "
                              "last statistics refresh.")
                        .Register(*registry)),
        tombstones_expired(
            prometheus::BuildCounter()
                .Name("compaction_cleaner_tombstones_expired_total")
                .Help("Tombstone heads the log cleaner of this daemon "
                      "expired (their keys' rows turned headless).")
                .Register(*registry)),
        cleaner(CleanerFamilies(*registry)),
        invalid_rows(prometheus::BuildGauge()
                         .Name("compaction_invalid_timestamp_rows")
                         .Help("Headless rows whose idle_since no server "
                               "clock wrote (infinite, or over an hour "
                               "ahead), which the janitor never expires, "
                               "as of the last statistics refresh.")
                         .Register(*registry)),
        stats_failures(prometheus::BuildCounter()
                           .Name("compaction_stats_refresh_failures_total")
                           .Help("Failed refreshes of the topic statistics.")
                           .Register(*registry)
                           .Add({})),
        stats_last(prometheus::BuildGauge()
                       .Name("compaction_stats_last_refresh_timestamp_seconds")
                       .Help("Unix time of the last successful statistics "
                             "refresh (0: none yet).")
                       .Register(*registry)
                       .Add({})),
        stats_unreadable(prometheus::BuildGauge()
                             .Name("compaction_stats_unreadable_topics")
                             .Help("Registered topics whose statistics the "
                                   "last refresh could not read (tables "
                                   "missing or altered, another baseline, "
                                   "no privilege); the log names them.")
                             .Register(*registry)
                             .Add({})),
        consumers(*registry) {
    prometheus::BuildGauge()
        .Name("compaction_build_info")
        .Help("Build information of compactiond; the value is always 1.")
        .Register(*registry)
        .Add({{"version", version}})
        .Set(1);
  }

  TopicSeries* Find(const std::string& topic) {
    auto it = series.find(topic);
    return it == series.end() ? nullptr : &it->second;
  }

  const bool detail;  // metrics-per-topic = detail
  std::shared_ptr<prometheus::Registry> registry;
  prometheus::Gauge& up;
  prometheus::Gauge& ready;
  prometheus::Gauge& listening;
  prometheus::Gauge& topics;
  prometheus::Family<prometheus::Gauge>& headless_rows;
  prometheus::Family<prometheus::Gauge>& headless_estimated;
  prometheus::Family<prometheus::Gauge>& oldest_age;
  prometheus::Family<prometheus::Gauge>& ttl;
  RunFamilies sweep;
  prometheus::Family<prometheus::Gauge>& retention;
  prometheus::Family<prometheus::Gauge>& tombstone_retention;
  prometheus::Family<prometheus::Gauge>& log_messages;
  prometheus::Family<prometheus::Gauge>& tombstoned_keys;
  prometheus::Family<prometheus::Gauge>& cleaner_lag;
  prometheus::Family<prometheus::Counter>& tombstones_expired;
  RunFamilies cleaner;
  prometheus::Family<prometheus::Gauge>& invalid_rows;
  prometheus::Counter& stats_failures;
  prometheus::Gauge& stats_last;
  prometheus::Gauge& stats_unreadable;
  ConsumerFamilies consumers;

  mutable std::mutex mu;  // guards `series`
  std::map<std::string, TopicSeries> series;
};

MetricsProbe::MetricsProbe(const std::string& version, MetricsDetail detail)
    : impl_(std::make_unique<Impl>(version, detail)) {}

MetricsProbe::~MetricsProbe() = default;

void MetricsProbe::SetUp(bool up) { impl_->up.Set(up ? 1 : 0); }

void MetricsProbe::SetReady(bool ready) { impl_->ready.Set(ready ? 1 : 0); }

void MetricsProbe::SetListening(bool listening) {
  impl_->listening.Set(listening ? 1 : 0);
}

void MetricsProbe::AddTopic(const compaction::TopicInfo& info) {
  const std::string& topic = info.name;
  std::lock_guard lock(impl_->mu);
  Impl::TopicSeries* s = impl_->Find(topic);
  if (s == nullptr) {
    const prometheus::Labels labels{{"topic", topic}};
    Impl& m = *impl_;
    const bool d = m.detail;
    s = &m.series
             .emplace(topic,
                      Impl::TopicSeries{
                          &m.headless_rows.Add(labels),
                          GaugePart::Add(m.headless_estimated, labels, d),
                          &m.oldest_age.Add(labels),
                          &m.ttl.Add(labels),
                          RunSeries::Add(m.sweep, labels, d),
                          d ? &m.retention.Add(labels) : nullptr,
                          d ? &m.tombstone_retention.Add(labels) : nullptr,
                          GaugePart::Add(m.log_messages, labels, d),
                          GaugePart::Add(m.tombstoned_keys, labels, d),
                          &m.cleaner_lag.Add(labels),
                          &m.tombstones_expired.Add(d ? labels
                                                      : prometheus::Labels{}),
                          RunSeries::Add(m.cleaner, labels, d),
                          GaugePart::Add(m.invalid_rows, labels, d),
                          {},
                      })
             .first->second;
    impl_->topics.Set(static_cast<double>(impl_->series.size()));
  }
  s->ttl->Set(std::chrono::duration<double>(info.headless_ttl).count());
  s->hold_after = std::min(RetentionSeconds(info.retention),
                           RetentionSeconds(info.tombstone_retention));
  if (s->retention != nullptr) {
    s->retention->Set(RetentionSeconds(info.retention));
    s->tombstone_retention->Set(RetentionSeconds(info.tombstone_retention));
  }
}

void MetricsProbe::RemoveTopic(const std::string& topic) {
  std::lock_guard lock(impl_->mu);
  Impl::TopicSeries* s = impl_->Find(topic);
  if (s == nullptr) return;
  Impl& m = *impl_;
  m.headless_rows.Remove(s->headless_rows);
  s->headless_estimated.Remove(m.headless_estimated);
  m.oldest_age.Remove(s->oldest_age);
  m.ttl.Remove(s->ttl);
  s->sweep.Remove(m.sweep);
  if (s->retention != nullptr) {
    m.retention.Remove(s->retention);
    m.tombstone_retention.Remove(s->tombstone_retention);
  }
  s->log_messages.Remove(m.log_messages);
  s->tombstoned_keys.Remove(m.tombstoned_keys);
  m.cleaner_lag.Remove(s->cleaner_lag);
  if (m.detail) m.tombstones_expired.Remove(s->tombstones_expired);
  s->cleaner.Remove(m.cleaner);
  s->invalid_rows.Remove(m.invalid_rows);
  metrics_internal::RemoveConsumers(m.consumers, s->consumers);
  m.series.erase(topic);
  m.topics.Set(static_cast<double>(m.series.size()));
}

bool MetricsProbe::HasTopic(const std::string& topic) const {
  std::lock_guard lock(impl_->mu);
  return impl_->series.count(topic) != 0;
}

void MetricsProbe::SetHeadless(const std::string& topic, std::int64_t rows,
                               bool estimated,
                               std::chrono::milliseconds oldest_age) {
  std::lock_guard lock(impl_->mu);
  Impl::TopicSeries* s = impl_->Find(topic);
  if (s == nullptr) return;
  s->headless_rows->Set(static_cast<double>(rows));
  s->headless_estimated.Set(estimated ? 1 : 0);
  s->oldest_age->Set(std::chrono::duration<double>(oldest_age).count());
}

void MetricsProbe::SweepFinished(const std::string& topic, std::int64_t deleted,
                                 std::chrono::duration<double> duration,
                                 bool complete) {
  std::lock_guard lock(impl_->mu);
  Impl::TopicSeries* s = impl_->Find(topic);
  if (s != nullptr) s->sweep.Finished(deleted, duration, complete);
}

void MetricsProbe::SweepFailed(const std::string& topic,
                               std::chrono::duration<double> duration) {
  std::lock_guard lock(impl_->mu);
  Impl::TopicSeries* s = impl_->Find(topic);
  if (s != nullptr) s->sweep.Failed(duration);
}

void MetricsProbe::SweepSkipped(const std::string& topic) {
  std::lock_guard lock(impl_->mu);
  Impl::TopicSeries* s = impl_->Find(topic);
  if (s != nullptr) s->sweep.skipped->Increment();
}

void MetricsProbe::SetInvalidTimestampRows(const std::string& topic,
                                           std::int64_t rows) {
  std::lock_guard lock(impl_->mu);
  Impl::TopicSeries* s = impl_->Find(topic);
  if (s != nullptr) s->invalid_rows.Set(static_cast<double>(rows));
}

void MetricsProbe::SetConsumers(
    const std::string& topic,
    const std::vector<compaction::ConsumerLag>& consumers) {
  std::lock_guard lock(impl_->mu);
  Impl::TopicSeries* s = impl_->Find(topic);
  if (s == nullptr) return;
  metrics_internal::SetConsumers(impl_->consumers, s->consumers, topic,
                                 consumers, s->hold_after);
}

void MetricsProbe::SetLog(const std::string& topic, std::int64_t messages,
                          std::int64_t tombstoned_keys,
                          std::chrono::milliseconds cleaner_lag) {
  std::lock_guard lock(impl_->mu);
  Impl::TopicSeries* s = impl_->Find(topic);
  if (s == nullptr) return;
  s->log_messages.Set(static_cast<double>(messages));
  s->tombstoned_keys.Set(static_cast<double>(tombstoned_keys));
  s->cleaner_lag->Set(std::chrono::duration<double>(cleaner_lag).count());
}

void MetricsProbe::CleanFinished(const std::string& topic,
                                 std::int64_t deleted_messages,
                                 std::int64_t tombstones_expired,
                                 std::chrono::duration<double> duration,
                                 bool complete) {
  std::lock_guard lock(impl_->mu);
  Impl::TopicSeries* s = impl_->Find(topic);
  if (s == nullptr) return;
  s->cleaner.Finished(deleted_messages, duration, complete);
  s->tombstones_expired->Increment(static_cast<double>(tombstones_expired));
}

void MetricsProbe::CleanFailed(const std::string& topic,
                               std::chrono::duration<double> duration) {
  std::lock_guard lock(impl_->mu);
  Impl::TopicSeries* s = impl_->Find(topic);
  if (s != nullptr) s->cleaner.Failed(duration);
}

void MetricsProbe::CleanSkipped(const std::string& topic) {
  std::lock_guard lock(impl_->mu);
  Impl::TopicSeries* s = impl_->Find(topic);
  if (s != nullptr) s->cleaner.skipped->Increment();
}

void MetricsProbe::StatsRefreshed() { impl_->stats_last.Set(UnixNow()); }

void MetricsProbe::StatsRefreshFailed() { impl_->stats_failures.Increment(); }

void MetricsProbe::SetStatsUnreadable(std::int64_t topics) {
  impl_->stats_unreadable.Set(static_cast<double>(topics));
}

std::string MetricsProbe::Serialize() const {
  // Collect() takes the registry's own locks; our mutex is not needed, and
  // not holding it keeps a slow scrape from blocking sweep completions.
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, impl_->registry->Collect());
  return out.str();
}

}  // namespace compactiond
