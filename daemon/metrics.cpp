#include "daemon/metrics.hpp"

#include <map>
#include <mutex>
#include <sstream>

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

namespace compactiond {
namespace {

double UnixNow() {
  return std::chrono::duration<double>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

prometheus::Histogram::BucketBoundaries DurationBuckets() {
  // Sweeps range from a millisecond (nothing to do) to many seconds (a
  // backlog of max-batches full batches).
  return {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
}

}  // namespace

struct MetricsProbe::Impl {
  struct TopicSeries {
    prometheus::Gauge* headless_rows;
    prometheus::Gauge* headless_estimated;
    prometheus::Gauge* oldest_age;
    prometheus::Gauge* ttl;
    prometheus::Counter* deleted;
    prometheus::Counter* sweeps;
    prometheus::Counter* failures;
    prometheus::Counter* skipped;
    prometheus::Histogram* duration;
    prometheus::Gauge* last_success;
  };

  explicit Impl(const std::string& version)
      : registry(std::make_shared<prometheus::Registry>()),
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
                      "an exact count (0).")
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
        deleted(prometheus::BuildCounter()
                    .Name("compaction_janitor_deleted_rows_total")
                    .Help("Expired headless rows deleted by this daemon.")
                    .Register(*registry)),
        sweeps(prometheus::BuildCounter()
                   .Name("compaction_janitor_sweeps_total")
                   .Help("Sweeps run by this daemon, failed ones included, "
                         "skipped ones not.")
                   .Register(*registry)),
        failures(prometheus::BuildCounter()
                     .Name("compaction_janitor_sweep_failures_total")
                     .Help("Sweeps that ended in an error.")
                     .Register(*registry)),
        skipped(prometheus::BuildCounter()
                    .Name("compaction_janitor_sweeps_skipped_total")
                    .Help("Sweeps skipped because another replica held the "
                          "topic's claim.")
                    .Register(*registry)),
        duration(prometheus::BuildHistogram()
                     .Name("compaction_janitor_sweep_duration_seconds")
                     .Help("Wall-clock duration of sweeps run by this daemon.")
                     .Register(*registry)),
        last_success(prometheus::BuildGauge()
                         .Name("compaction_janitor_last_success_timestamp_"
                               "seconds")
                         .Help("Unix time of the topic's last successful "
                               "sweep by this daemon (0: none yet).")
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
                             .Add({})) {
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

  std::shared_ptr<prometheus::Registry> registry;
  prometheus::Gauge& up;
  prometheus::Gauge& ready;
  prometheus::Gauge& topics;
  prometheus::Family<prometheus::Gauge>& headless_rows;
  prometheus::Family<prometheus::Gauge>& headless_estimated;
  prometheus::Family<prometheus::Gauge>& oldest_age;
  prometheus::Family<prometheus::Gauge>& ttl;
  prometheus::Family<prometheus::Counter>& deleted;
  prometheus::Family<prometheus::Counter>& sweeps;
  prometheus::Family<prometheus::Counter>& failures;
  prometheus::Family<prometheus::Counter>& skipped;
  prometheus::Family<prometheus::Histogram>& duration;
  prometheus::Family<prometheus::Gauge>& last_success;
  prometheus::Counter& stats_failures;
  prometheus::Gauge& stats_last;
  prometheus::Gauge& stats_unreadable;

  mutable std::mutex mu;  // guards `series`
  std::map<std::string, TopicSeries> series;
};

MetricsProbe::MetricsProbe(const std::string& version)
    : impl_(std::make_unique<Impl>(version)) {}

MetricsProbe::~MetricsProbe() = default;

void MetricsProbe::SetUp(bool up) { impl_->up.Set(up ? 1 : 0); }

void MetricsProbe::SetReady(bool ready) { impl_->ready.Set(ready ? 1 : 0); }

void MetricsProbe::AddTopic(const std::string& topic,
                            std::chrono::milliseconds ttl) {
  std::lock_guard lock(impl_->mu);
  Impl::TopicSeries* s = impl_->Find(topic);
  if (s == nullptr) {
    const prometheus::Labels labels{{"topic", topic}};
    Impl& m = *impl_;
    s = &m.series
             .emplace(topic,
                      Impl::TopicSeries{
                          &m.headless_rows.Add(labels),
                          &m.headless_estimated.Add(labels),
                          &m.oldest_age.Add(labels),
                          &m.ttl.Add(labels),
                          &m.deleted.Add(labels),
                          &m.sweeps.Add(labels),
                          &m.failures.Add(labels),
                          &m.skipped.Add(labels),
                          &m.duration.Add(labels, DurationBuckets()),
                          &m.last_success.Add(labels),
                      })
             .first->second;
    impl_->topics.Set(static_cast<double>(impl_->series.size()));
  }
  s->ttl->Set(std::chrono::duration<double>(ttl).count());
}

void MetricsProbe::RemoveTopic(const std::string& topic) {
  std::lock_guard lock(impl_->mu);
  Impl::TopicSeries* s = impl_->Find(topic);
  if (s == nullptr) return;
  Impl& m = *impl_;
  m.headless_rows.Remove(s->headless_rows);
  m.headless_estimated.Remove(s->headless_estimated);
  m.oldest_age.Remove(s->oldest_age);
  m.ttl.Remove(s->ttl);
  m.deleted.Remove(s->deleted);
  m.sweeps.Remove(s->sweeps);
  m.failures.Remove(s->failures);
  m.skipped.Remove(s->skipped);
  m.duration.Remove(s->duration);
  m.last_success.Remove(s->last_success);
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
  s->headless_estimated->Set(estimated ? 1 : 0);
  s->oldest_age->Set(std::chrono::duration<double>(oldest_age).count());
}

void MetricsProbe::SweepFinished(const std::string& topic,
                                 std::int64_t deleted,
                                 std::chrono::duration<double> duration,
                                 bool complete) {
  std::lock_guard lock(impl_->mu);
  Impl::TopicSeries* s = impl_->Find(topic);
  if (s == nullptr) return;
  s->sweeps->Increment();
  s->deleted->Increment(static_cast<double>(deleted));
  s->duration->Observe(duration.count());
  if (complete) s->last_success->Set(UnixNow());
}

void MetricsProbe::SweepFailed(const std::string& topic,
                               std::chrono::duration<double> duration) {
  std::lock_guard lock(impl_->mu);
  Impl::TopicSeries* s = impl_->Find(topic);
  if (s == nullptr) return;
  s->sweeps->Increment();
  s->failures->Increment();
  s->duration->Observe(duration.count());
}

void MetricsProbe::SweepSkipped(const std::string& topic) {
  std::lock_guard lock(impl_->mu);
  Impl::TopicSeries* s = impl_->Find(topic);
  if (s != nullptr) s->skipped->Increment();
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
