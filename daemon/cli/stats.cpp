// stats [--json]: every topic's statistics, as a table or a JSON array.
#include <compaction/compaction.hpp>
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "daemon/cli/cli.hpp"
#include "daemon/cli/commands.hpp"
#include "daemon/cli/common.hpp"
#include "daemon/duration.hpp"

namespace compactiond::cli {
namespace {

nlohmann::json RunJson(const compaction::JanitorState& j) {
  return {{"last_sweep_started_at", Timestamp(j.last_sweep_started_at)},
          {"last_sweep_finished_at", Timestamp(j.last_sweep_finished_at)},
          {"last_success_at", Timestamp(j.last_success_at)},
          {"last_deleted_rows", j.last_deleted_rows},
          {"total_deleted_rows", j.total_deleted_rows},
          {"last_error", j.last_error},
          {"claimed_by", j.claimed_by}};
}

nlohmann::json StatsJson(const compaction::TopicOverview& t) {
  return {
      {"topic", t.info.name},
      {"id", t.info.id},
      {"headless_ttl_seconds", Seconds(t.info.headless_ttl)},
      {"headless_rows", t.stats.headless_rows},
      {"headless_rows_estimated", t.stats.headless_rows_estimated},
      {"headless_oldest_age_seconds", Seconds(t.stats.oldest_headless_age)},
      {"invalid_timestamp_rows", t.stats.invalid_timestamp_rows},
      {"estimated_head_rows", t.stats.estimated_head_rows},
      {"janitor", RunJson(t.stats.janitor)},
      {"retention_seconds", RetentionJson(t.info.retention)},
      {"tombstone_retention_seconds",
       RetentionJson(t.info.tombstone_retention)},
      {"log_messages_estimated", t.stats.estimated_messages},
      {"tombstoned_keys", t.stats.tombstoned_keys},
      {"cleaner_lag_seconds", Seconds(t.stats.cleaner_lag)},
      {"cleaner", RunJson(t.stats.cleaner)},
      {"tombstones_expired_total", t.stats.total_tombstones_expired},
      // Non-empty when this topic's stats could not be read (the rest of
      // the object is then zero).
      {"stats_error", t.error},
  };
}

// "~" marks a count above stats-exact-count-limit, estimated.
std::string HeadlessText(const compaction::TopicStats& stats) {
  return (stats.headless_rows_estimated ? "~" : "") +
         std::to_string(stats.headless_rows);
}

// The topic's error: unreadable stats, else the sweep's, else the cleaner's.
std::string LastError(const compaction::TopicOverview& t) {
  if (!t.error.empty()) return "stats unreadable: " + t.error;
  if (!t.stats.janitor.last_error.empty()) return t.stats.janitor.last_error;
  if (!t.stats.cleaner.last_error.empty()) {
    return "cleaner: " + t.stats.cleaner.last_error;
  }
  return "";
}

// Seconds with one decimal, for the table.
std::string SecondsText(Millis d) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(1) << Seconds(d);
  return out.str();
}

void PrintHeader() {
  std::cout << std::left << std::setw(32) << "TOPIC" << std::setw(10) << "TTL"
            << std::setw(12) << "HEADLESS" << std::setw(14) << "OLDEST_AGE_S"
            << std::setw(14) << "DELETED_TOTAL" << std::setw(12) << "LOG_MSGS"
            << std::setw(12) << "TOMBSTONED" << std::setw(14) << "CLEANER_LAG_S"
            << "LAST_ERROR\n";
}

void PrintRow(const compaction::TopicOverview& t) {
  std::cout << std::left << std::setw(32) << Printable(t.info.name)
            << std::setw(10) << FormatDuration(t.info.headless_ttl)
            << std::setw(12) << HeadlessText(t.stats) << std::setw(14)
            << SecondsText(t.stats.oldest_headless_age) << std::setw(14)
            << t.stats.janitor.total_deleted_rows << std::setw(12)
            << ("~" + std::to_string(t.stats.estimated_messages))
            << std::setw(12) << t.stats.tombstoned_keys << std::setw(14)
            << SecondsText(t.stats.cleaner_lag) << Printable(LastError(t))
            << "\n";
}

}  // namespace

int Stats(const Settings& s, bool json) {
  compaction::Client client = Connect(s);
  compaction::StatsOptions options;
  options.exact_count_limit = s.stats_exact_count_limit;
  auto all = client.ListTopicStats(options);
  if (json) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& t : all) out.push_back(StatsJson(t));
    std::cout << out.dump(2) << "\n";
    return kExitOk;
  }
  PrintHeader();
  for (const auto& t : all) PrintRow(t);
  return kExitOk;
}

}  // namespace compactiond::cli
