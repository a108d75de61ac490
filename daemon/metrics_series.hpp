// The per-topic series of MetricsProbe (daemon/metrics.cpp) and how a
// topic's share of a family is kept under metrics-per-topic: its own
// labelled series (detail), or a part of one unlabelled series (basic).
// Internal to metrics.cpp, the only code that touches prometheus-cpp.
#pragma once

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>

#include <chrono>
#include <compaction/options.hpp>
#include <cstdint>
#include <limits>

namespace compactiond::metrics_internal {

inline double UnixNow() {
  return std::chrono::duration<double>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

inline prometheus::Histogram::BucketBoundaries DurationBuckets() {
  // Sweeps range from a millisecond (nothing to do) to many seconds (a
  // backlog of max-batches full batches).
  return {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
}

// A retention as seconds; kKeepForever is +Inf.
inline double RetentionSeconds(std::chrono::milliseconds d) {
  if (d == compaction::kKeepForever) {
    return std::numeric_limits<double>::infinity();
  }
  return std::chrono::duration<double>(d).count();
}

// The families of one kind of run (the headless sweep, the log cleaner):
// the same shape for both, so dashboards and alerts read them alike.
struct RunFamilies {
  prometheus::Family<prometheus::Counter>& deleted;
  prometheus::Family<prometheus::Counter>& runs;
  prometheus::Family<prometheus::Counter>& failures;
  prometheus::Family<prometheus::Counter>& skipped;
  prometheus::Family<prometheus::Histogram>& duration;
  prometheus::Family<prometheus::Gauge>& last_success;
};

// One topic's series of one kind of run. With metrics-per-topic = basic,
// the counts and durations are the family's one unlabelled series, shared
// by every topic (`shared`), and the failure counter of a topic is created
// at its first failure: a topic that never failed adds no line.
struct RunSeries {
  prometheus::Counter* deleted;
  prometheus::Counter* runs;
  prometheus::Counter* failures;  // null until the first failure (basic)
  prometheus::Counter* skipped;
  prometheus::Histogram* duration;
  prometheus::Gauge* last_success;
  prometheus::Family<prometheus::Counter>* failures_family;
  prometheus::Labels labels;
  bool shared;

  static RunSeries Add(RunFamilies& f, const prometheus::Labels& labels,
                       bool detail) {
    const prometheus::Labels shared_labels;
    const prometheus::Labels& counts = detail ? labels : shared_labels;
    return RunSeries{&f.deleted.Add(counts),
                     &f.runs.Add(counts),
                     detail ? &f.failures.Add(labels) : nullptr,
                     &f.skipped.Add(counts),
                     &f.duration.Add(counts, DurationBuckets()),
                     &f.last_success.Add(labels),
                     &f.failures,
                     labels,
                     !detail};
  }
  void Remove(RunFamilies& f) const {
    if (failures != nullptr) f.failures.Remove(failures);
    f.last_success.Remove(last_success);
    if (shared) return;
    f.deleted.Remove(deleted);
    f.runs.Remove(runs);
    f.skipped.Remove(skipped);
    f.duration.Remove(duration);
  }
  void Finished(std::int64_t rows, std::chrono::duration<double> took,
                bool complete) const {
    runs->Increment();
    deleted->Increment(static_cast<double>(rows));
    duration->Observe(took.count());
    if (complete) last_success->Set(UnixNow());
  }
  void Failed(std::chrono::duration<double> took) {
    runs->Increment();
    if (failures == nullptr) failures = &failures_family->Add(labels);
    failures->Increment();
    duration->Observe(took.count());
  }
};

// A topic's share of a gauge: its own series (detail), or its part of the
// family's one unlabelled sum (basic), kept so that a change or the topic's
// removal moves the sum by the difference.
struct GaugePart {
  prometheus::Gauge* gauge = nullptr;
  double value = 0;
  bool shared = false;

  static GaugePart Add(prometheus::Family<prometheus::Gauge>& f,
                       const prometheus::Labels& labels, bool detail) {
    return GaugePart{&f.Add(detail ? labels : prometheus::Labels{}), 0,
                     !detail};
  }
  void Set(double v) {
    if (shared) {
      gauge->Increment(v - value);
    } else {
      gauge->Set(v);
    }
    value = v;
  }
  void Remove(prometheus::Family<prometheus::Gauge>& f) const {
    if (shared) {
      gauge->Decrement(value);
    } else {
      f.Remove(gauge);
    }
  }
};

}  // namespace compactiond::metrics_internal
