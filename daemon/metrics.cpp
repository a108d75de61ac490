#include "daemon/metrics.hpp"

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <algorithm>
#include <array>
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
using metrics_internal::GaugePart;
using metrics_internal::RetentionSeconds;
using metrics_internal::RunFamilies;
using metrics_internal::RunSeries;
using metrics_internal::UnixNow;
using GaugeFamily = prometheus::Family<prometheus::Gauge>;
using CounterFamily = prometheus::Family<prometheus::Counter>;

// A metric's name and HELP text.
struct Text {
  const char* name;
  const char* help;
};

template <typename Builder>
auto& Family(Builder builder, prometheus::Registry& r, const Text& t) {
  return builder.Name(t.name).Help(t.help).Register(r);
}

GaugeFamily& Gauges(prometheus::Registry& r, const Text& t) {
  return Family(prometheus::BuildGauge(), r, t);
}

CounterFamily& Counters(prometheus::Registry& r, const Text& t) {
  return Family(prometheus::BuildCounter(), r, t);
}

// The families of the runs of each job, in kJobs order: the same shape for
// both, so dashboards and alerts read them alike.
using PerJob = std::array<Text, kJobs.size()>;
const PerJob kDeleted = {
    Text{"compaction_janitor_deleted_rows_total",
         "Expired headless rows deleted by this daemon."},
    Text{"compaction_cleaner_deleted_messages_total",
         "Messages the log cleaner of this daemon deleted (superseded or out "
         "of retention, expired tombstones)."}};
const PerJob kRuns = {
    Text{"compaction_janitor_sweeps_total",
         "Sweeps run by this daemon, failed ones included, skipped ones not."},
    Text{"compaction_cleaner_runs_total",
         "Log cleaner passes run by this daemon, failed ones included, "
         "skipped ones not."}};
const PerJob kFailures = {Text{"compaction_janitor_sweep_failures_total",
                               "Sweeps that ended in an error."},
                          Text{"compaction_cleaner_run_failures_total",
                               "Log cleaner passes that ended in an error."}};
const PerJob kSkipped = {
    Text{"compaction_janitor_sweeps_skipped_total",
         "Sweeps skipped because another replica held the topic's claim."},
    Text{"compaction_cleaner_runs_skipped_total",
         "Log cleaner passes skipped because another replica held the "
         "topic's cleaner claim."}};
const PerJob kDuration = {
    Text{"compaction_janitor_sweep_duration_seconds",
         "Wall-clock duration of sweeps run by this daemon."},
    Text{"compaction_cleaner_run_duration_seconds",
         "Wall-clock duration of log cleaner passes run by this daemon."}};
const PerJob kLastSuccess = {
    Text{"compaction_janitor_last_success_timestamp_seconds",
         "Unix time of the topic's last successful sweep by this daemon (0: "
         "none yet)."},
    Text{"compaction_cleaner_last_success_timestamp_seconds",
         "Unix time of the topic's last successful log cleaner pass by this "
         "daemon (0: none yet)."}};

RunFamilies BuildRunFamilies(prometheus::Registry& r, Job job) {
  const size_t i = Index(job);
  return RunFamilies{Counters(r, kDeleted[i]),
                     Counters(r, kRuns[i]),
                     Counters(r, kFailures[i]),
                     Counters(r, kSkipped[i]),
                     Family(prometheus::BuildHistogram(), r, kDuration[i]),
                     Gauges(r, kLastSuccess[i])};
}

// The series without labels: the process's state and the refresh's.
struct ProcessSeries {
  explicit ProcessSeries(prometheus::Registry& r)
      : up(Gauges(r, {"compaction_up",
                      "Whether the database is reachable (1) or not (0)."})
               .Add({})),
        ready(Gauges(r, {"compaction_ready",
                         "Whether topics are loaded and the database is "
                         "reachable (1) or not (0)."})
                  .Add({})),
        listening(Gauges(r, {"compaction_topic_events_listening",
                             "Whether topic changes arrive over LISTEN (1) "
                             "or only by polling the topic list (0)."})
                      .Add({})),
        topics(Gauges(r, {"compaction_topics",
                          "Number of topics known to the daemon."})
                   .Add({})),
        stats_failures(Counters(r, {"compaction_stats_refresh_failures_total",
                                    "Failed refreshes of the topic "
                                    "statistics."})
                           .Add({})),
        stats_last(
            Gauges(r, {"compaction_stats_last_refresh_timestamp_seconds",
                       "Unix time of the last successful statistics refresh "
                       "(0: none yet)."})
                .Add({})),
        stats_unreadable(
            Gauges(r, {"compaction_stats_unreadable_topics",
                       "Registered topics whose statistics the last refresh "
                       "could not read (tables missing or altered, another "
                       "baseline, no privilege); the log names them."})
                .Add({})) {}

  prometheus::Gauge& up;
  prometheus::Gauge& ready;
  prometheus::Gauge& listening;
  prometheus::Gauge& topics;
  prometheus::Counter& stats_failures;
  prometheus::Gauge& stats_last;
  prometheus::Gauge& stats_unreadable;
};

// The families with a series per topic (or a share of one, basic).
struct TopicFamilies {
  explicit TopicFamilies(prometheus::Registry& r)
      : headless_rows(Gauges(
            r, {"compaction_headless_rows",
                "Headless rows in the topic's compaction-head table, as of "
                "the last statistics refresh; an estimate when "
                "compaction_headless_rows_estimated is 1."})),
        headless_estimated(Gauges(
            r, {"compaction_headless_rows_estimated",
                "Whether compaction_headless_rows is an estimate (1: more "
                "headless rows than the exact-count limit) or an exact count "
                "(0); with metrics-per-topic = basic, unlabelled: how many "
                "topics' counts are estimates."})),
        oldest_age(Gauges(r, {"compaction_headless_oldest_age_seconds",
                              "Age of the oldest headless row (0 when none), "
                              "as of the last statistics refresh."})),
        ttl(Gauges(r, {"compaction_topic_headless_ttl_seconds",
                       "Headless-row TTL configured for the topic."})),
        retention(Gauges(r, {"compaction_topic_retention_seconds",
                             "Retention of messages that are not their key's "
                             "head (+Inf: kept forever)."})),
        tombstone_retention(
            Gauges(r, {"compaction_topic_tombstone_retention_seconds",
                       "How long a tombstone head is kept (+Inf: forever)."})),
        log_messages(Gauges(
            r, {"compaction_log_messages",
                "Estimated messages in the topic's log (the planner's "
                "estimate), as of the last statistics refresh (summed over "
                "topics with metrics-per-topic = basic)."})),
        tombstoned_keys(Gauges(
            r, {"compaction_tombstoned_keys",
                "Keys whose head is a tombstone, as the log cleaner's last "
                "pass counted them (summed over topics with "
                "metrics-per-topic = basic)."})),
        cleaner_lag(Gauges(
            r, {"compaction_cleaner_lag_seconds",
                "How far the log cleaner is behind the topic's retention "
                "cutoff (0: caught up), as of the last statistics "
                "refresh."})),
        tombstones_expired(Counters(
            r, {"compaction_cleaner_tombstones_expired_total",
                "Tombstone heads the log cleaner of this daemon expired "
                "(their keys' rows turned headless)."})),
        invalid_rows(Gauges(
            r, {"compaction_invalid_timestamp_rows",
                "Headless rows whose idle_since no server clock wrote "
                "(infinite, or over an hour ahead), which the janitor never "
                "expires, as of the last statistics refresh."})),
        runs{BuildRunFamilies(r, Job::kSweep),
             BuildRunFamilies(r, Job::kClean)} {}

  GaugeFamily& headless_rows;
  GaugeFamily& headless_estimated;
  GaugeFamily& oldest_age;
  GaugeFamily& ttl;
  GaugeFamily& retention;
  GaugeFamily& tombstone_retention;
  GaugeFamily& log_messages;
  GaugeFamily& tombstoned_keys;
  GaugeFamily& cleaner_lag;
  CounterFamily& tombstones_expired;
  GaugeFamily& invalid_rows;
  std::array<RunFamilies, kJobs.size()> runs;
};

}  // namespace

struct MetricsProbe::Impl {
  struct TopicSeries {
    prometheus::Gauge* headless_rows;
    GaugePart headless_estimated;
    prometheus::Gauge* oldest_age;
    prometheus::Gauge* ttl;
    prometheus::Gauge* retention;            // null: basic
    prometheus::Gauge* tombstone_retention;  // null: basic
    GaugePart log_messages;
    GaugePart tombstoned_keys;
    prometheus::Gauge* cleaner_lag;
    prometheus::Counter* tombstones_expired;  // shared: basic
    GaugePart invalid_rows;
    std::array<RunSeries, kJobs.size()> runs;
    ConsumerMap consumers;
    double hold_after = std::numeric_limits<double>::infinity();
  };

  Impl(const std::string& version, MetricsDetail per_topic)
      : detail(per_topic == MetricsDetail::kDetail),
        registry(std::make_shared<prometheus::Registry>()),
        process(*registry),
        families(*registry),
        consumers(*registry) {
    Gauges(*registry,
           {"compaction_build_info",
            "Build information of compactiond; the value is always 1."})
        .Add({{"version", version}})
        .Set(1);
  }

  TopicSeries& Add(const std::string& topic) {
    const prometheus::Labels labels{{"topic", topic}};
    const bool d = detail;
    TopicFamilies& f = families;
    TopicSeries s{
        &f.headless_rows.Add(labels),
        GaugePart::Add(f.headless_estimated, labels, d),
        &f.oldest_age.Add(labels),
        &f.ttl.Add(labels),
        d ? &f.retention.Add(labels) : nullptr,
        d ? &f.tombstone_retention.Add(labels) : nullptr,
        GaugePart::Add(f.log_messages, labels, d),
        GaugePart::Add(f.tombstoned_keys, labels, d),
        &f.cleaner_lag.Add(labels),
        &f.tombstones_expired.Add(d ? labels : prometheus::Labels{}),
        GaugePart::Add(f.invalid_rows, labels, d),
        {RunSeries::Add(f.runs[0], labels, d),
         RunSeries::Add(f.runs[1], labels, d)},
        ConsumerMap::Add(consumers, topic),
    };
    return series.emplace(topic, std::move(s)).first->second;
  }

  TopicSeries* Find(const std::string& topic) {
    auto it = series.find(topic);
    return it == series.end() ? nullptr : &it->second;
  }

  const bool detail;  // metrics-per-topic = detail
  std::shared_ptr<prometheus::Registry> registry;
  ProcessSeries process;
  TopicFamilies families;
  ConsumerFamilies consumers;

  mutable std::mutex mu;  // guards `series`
  std::map<std::string, TopicSeries> series;
};

MetricsProbe::MetricsProbe(const std::string& version, MetricsDetail detail)
    : impl_(std::make_unique<Impl>(version, detail)) {}

MetricsProbe::~MetricsProbe() = default;

void MetricsProbe::SetUp(bool up) { impl_->process.up.Set(up ? 1 : 0); }

void MetricsProbe::SetReady(bool ready) {
  impl_->process.ready.Set(ready ? 1 : 0);
}

void MetricsProbe::SetListening(bool listening) {
  impl_->process.listening.Set(listening ? 1 : 0);
}

void MetricsProbe::AddTopic(const compaction::TopicInfo& info) {
  std::lock_guard lock(impl_->mu);
  Impl::TopicSeries* s = impl_->Find(info.name);
  if (s == nullptr) {
    s = &impl_->Add(info.name);
    impl_->process.topics.Set(static_cast<double>(impl_->series.size()));
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
  TopicFamilies& f = m.families;
  f.headless_rows.Remove(s->headless_rows);
  s->headless_estimated.Remove(f.headless_estimated);
  f.oldest_age.Remove(s->oldest_age);
  f.ttl.Remove(s->ttl);
  if (s->retention != nullptr) {
    f.retention.Remove(s->retention);
    f.tombstone_retention.Remove(s->tombstone_retention);
  }
  s->log_messages.Remove(f.log_messages);
  s->tombstoned_keys.Remove(f.tombstoned_keys);
  f.cleaner_lag.Remove(s->cleaner_lag);
  if (m.detail) f.tombstones_expired.Remove(s->tombstones_expired);
  s->invalid_rows.Remove(f.invalid_rows);
  for (Job job : kJobs) {
    s->runs[Index(job)].Remove(f.runs[Index(job)]);
  }
  metrics_internal::RemoveConsumers(m.consumers, s->consumers);
  m.series.erase(topic);
  m.process.topics.Set(static_cast<double>(m.series.size()));
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

void MetricsProbe::RunFinished(Job job, const std::string& topic,
                               const compaction::CompactResult& r,
                               std::chrono::duration<double> duration) {
  std::lock_guard lock(impl_->mu);
  Impl::TopicSeries* s = impl_->Find(topic);
  if (s == nullptr) return;
  RunSeries& run = s->runs[Index(job)];
  if (r.skipped) {
    run.skipped->Increment();
    return;
  }
  run.Finished(r.deleted, duration, !r.cancelled && !r.lost_claim);
  s->tombstones_expired->Increment(static_cast<double>(r.tombstones_expired));
}

void MetricsProbe::RunFailed(Job job, const std::string& topic,
                             std::chrono::duration<double> duration) {
  std::lock_guard lock(impl_->mu);
  Impl::TopicSeries* s = impl_->Find(topic);
  if (s != nullptr) s->runs[Index(job)].Failed(duration);
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

void MetricsProbe::ConsumersUnreadable(const std::string& topic) {
  std::lock_guard lock(impl_->mu);
  Impl::TopicSeries* s = impl_->Find(topic);
  if (s != nullptr) {
    metrics_internal::ConsumersUnreadable(impl_->consumers, s->consumers);
  }
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

void MetricsProbe::StatsRefreshed() {
  impl_->process.stats_last.Set(UnixNow());
}

void MetricsProbe::StatsRefreshFailed() {
  impl_->process.stats_failures.Increment();
}

void MetricsProbe::SetStatsUnreadable(std::int64_t topics) {
  impl_->process.stats_unreadable.Set(static_cast<double>(topics));
}

std::string MetricsProbe::Serialize() const {
  // Collect() takes the registry's own locks; our mutex is not needed, and
  // not holding it keeps a slow scrape from blocking sweep completions.
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, impl_->registry->Collect());
  return out.str();
}

}  // namespace compactiond
