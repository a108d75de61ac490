// The size of /metrics at 10,000 topics, rendered by the real MetricsProbe
// with every per-topic series set as a running daemon sets it (a sweep and a
// cleaner pass finished, a statistics refresh published). Size is
// deterministic; render time is recorded in test/bench/RESULTS.md, not
// asserted here.
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <string>

#include "daemon/metrics.hpp"

using compactiond::MetricsDetail;
using compactiond::MetricsProbe;
using namespace std::chrono_literals;

namespace {

constexpr int kTopics = 10000;

std::string Name(int i) {
  char name[32];
  std::snprintf(name, sizeof(name), "topic-%05d", i);
  return name;
}

// Fills a probe as a running daemon would and serializes it; the render
// time (Serialize only) is reported with -s, for RESULTS.md.
std::string Render(MetricsDetail detail, int failing) {
  MetricsProbe probe("test", detail);
  probe.SetUp(true);
  probe.SetReady(true);
  for (int i = 0; i < kTopics; ++i) {
    compaction::TopicInfo info;
    info.id = i + 1;
    info.name = Name(i);
    info.headless_ttl = 1h;
    info.retention = 168h;
    info.tombstone_retention = 24h;
    probe.AddTopic(info);
    probe.SetHeadless(info.name, 123456, i % 2 == 0, 1234567ms);
    probe.SetLog(info.name, 9876543, 42, 1500ms);
    probe.SetInvalidTimestampRows(info.name, 0);
    compaction::CompactResult swept;
    swept.deleted = 1000;
    probe.RunFinished(compactiond::Job::kSweep, info.name, swept, 0.042s);
    compaction::CompactResult cleaned;
    cleaned.deleted = 5000;
    cleaned.tombstones_expired = 3;
    probe.RunFinished(compactiond::Job::kClean, info.name, cleaned, 0.25s);
    for (compactiond::Job job : compactiond::kJobs) {
      if (i < failing) probe.RunFailed(job, info.name, 0.01s);
    }
  }
  std::string text;
  for (int i = 0; i < 3; ++i) {
    const auto started = std::chrono::steady_clock::now();
    text = probe.Serialize();
    const double ms = std::chrono::duration<double, std::milli>(
                          std::chrono::steady_clock::now() - started)
                          .count();
    const char* mode = detail == MetricsDetail::kBasic ? "basic" : "detail";
    WARN(mode << " render " << ms << " ms");
  }
  return text;
}

std::size_t Lines(const std::string& text) {
  std::size_t n = 0;
  for (char c : text) n += c == '\n';
  return n;
}

}  // namespace

TEST_CASE("metrics of 10000 topics: basic under 5 MB and detail as before") {
  const std::string basic = Render(MetricsDetail::kBasic, 100);
  const std::string detail = Render(MetricsDetail::kDetail, 100);
  WARN("basic " << basic.size() << " bytes, " << Lines(basic) << " lines; "
                << "detail " << detail.size() << " bytes, " << Lines(detail)
                << " lines");
  CHECK(basic.size() < 5'000'000);
  // What an operator needs stays per topic in basic.
  for (const char* name :
       {"compaction_headless_rows{topic=\"topic-09999\"}",
        "compaction_headless_oldest_age_seconds{topic=\"topic-09999\"}",
        "compaction_topic_headless_ttl_seconds{topic=\"topic-09999\"}",
        "compaction_cleaner_lag_seconds{topic=\"topic-09999\"}",
        "compaction_janitor_last_success_timestamp_seconds{topic=\"topic-"
        "09999\"}",
        "compaction_cleaner_last_success_timestamp_seconds{topic=\"topic-"
        "09999\"}",
        "compaction_janitor_sweep_failures_total{topic=\"topic-00099\"} 1",
        "compaction_cleaner_run_failures_total{topic=\"topic-00099\"} 1",
        "compaction_janitor_deleted_rows_total 10000000",
        "compaction_cleaner_deleted_messages_total 50000000",
        "compaction_headless_rows_estimated 5000"}) {
    INFO(name);
    CHECK(basic.find(name) != std::string::npos);
  }
  // A topic that never failed has no failure series in basic.
  CHECK(basic.find("compaction_janitor_sweep_failures_total{topic=\"topic-"
                   "00100\"}") == std::string::npos);
  CHECK(detail.find("compaction_janitor_sweep_failures_total{topic=\"topic-"
                    "00100\"} 0") != std::string::npos);
  CHECK(detail.size() > 30'000'000);
}

TEST_CASE("basic sums follow a removed topic") {
  MetricsProbe probe("test", MetricsDetail::kBasic);
  for (int i = 0; i < 2; ++i) {
    compaction::TopicInfo info;
    info.name = Name(i);
    probe.AddTopic(info);
    probe.SetLog(info.name, 10, 1, 0ms);
    probe.SetLog(info.name, 100, 2, 0ms);  // a refresh replaces, not adds
  }
  CHECK(probe.Serialize().find("compaction_log_messages 200\n") !=
        std::string::npos);
  probe.RemoveTopic(Name(0));
  const std::string text = probe.Serialize();
  CHECK(text.find("compaction_log_messages 100\n") != std::string::npos);
  CHECK(text.find("compaction_tombstoned_keys 2\n") != std::string::npos);
  CHECK(text.find("topic-00000") == std::string::npos);
}
