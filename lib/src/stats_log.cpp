// The log's figures of the topic stats (the cleaner's bookkeeping and lag)
// and the count of planted timestamps; see stats_parts.hpp.
#include <algorithm>
#include <unordered_map>

#include "rows.hpp"
#include "stats_parts.hpp"

namespace compaction::detail {
namespace {

// `column` when it is usable, else NULL.
std::string Valid(const std::string& column) {
  return "CASE WHEN " + column + " > " + kBadBefore + " AND " + column +
         " <= " + kBadAfter + " THEN " + column + " END";
}

// The message table's estimated size from its pg_class row.
constexpr const char* kSize =
    "coalesce(CASE WHEN mc.relpages > 0 AND mc.reltuples > "
    "0::float4 THEN mc.reltuples::float8 / mc.relpages::float8 * "
    "(pg_catalog.pg_relation_size(mc.oid::regclass) / "
    "pg_catalog.current_setting('block_size')::bigint)::float8 END, "
    "0)::bigint";

// The log's figures for `topics`, one statement for all of them: the
// cleaner's bookkeeping (log_cleaner_state), its lag from the server clock,
// and the message table's estimated size (as in kEstimateSql: density at
// the last statistics times the current size; reltuples alone lags a
// growing log). Apart from the stats statement because that one must stay
// short enough to show whole in pg_stat_activity. Reads no message table,
// so the monitor role can run it; a topic destroyed meanwhile drops out of
// the join and keeps zeros.
std::string CleanerSql(const ClientCore& core) {
  // On Citus the message table on the coordinator is an empty shell: the
  // same estimate summed over the shards (shard_sizes, sql/citus_v1.sql).
  const std::string size = core.citus()
                               ? "(SELECT e.estimated FROM " + core.schema() +
                                     ".shard_sizes($2::text || '.message_' || "
                                     "t.id::text) e)"
                               : std::string(kSize);
  return "/* compaction:Stats cleaner */ SELECT t.id, "
         "CASE WHEN t.retention_ms = 9223372036854775807::bigint THEN 0 "
         "ELSE greatest(0::numeric, (extract(epoch FROM (pg_catalog.now() - "
         "t.retention_ms::float8 * interval '1 millisecond') - coalesce(" +
         Valid("c.next_created_at") + ", " + Valid("c.scanned_at") + ", " +
         Valid("t.created_at") +
         ", pg_catalog.now())) * 1e3))::bigint "
         "END, c.tombstoned_keys, c.last_tombstones_expired, "
         "c.total_tombstones_expired, " +
         Micros("c.last_sweep_started_at") + ", " +
         Micros("c.last_sweep_finished_at") + ", " +
         Micros("c.last_success_at") +
         ", c.last_deleted_rows, c.total_deleted_rows, c.last_error, "
         "CASE WHEN c.claimed_until > pg_catalog.now() THEN c.claimed_by END, "
         "CASE WHEN c.claimed_until > pg_catalog.now() THEN " +
         Micros("c.claimed_until") + " END, " + size +
         " FROM pg_catalog.unnest($1::bigint[]) u(id) JOIN " + core.schema() +
         ".topic t ON t.id = u.id LEFT JOIN " + core.schema() +
         ".log_cleaner_state c ON c.topic_id = t.id" +
         (core.citus() ? ""
                       : " LEFT JOIN pg_catalog.pg_class mc ON mc.oid = "
                         "pg_catalog.to_regclass($2::text || '.message_' || "
                         "t.id::text)::oid");
}

void ParseCleaner(const pg::Result& r, int row, TopicStats& out) {
  out.cleaner_lag = std::chrono::milliseconds(pg::Int64(r, row, 1));
  out.tombstoned_keys = pg::OptInt64(r, row, 2).value_or(0);
  out.last_tombstones_expired = pg::OptInt64(r, row, 3).value_or(0);
  out.total_tombstones_expired = pg::OptInt64(r, row, 4).value_or(0);
  JanitorState& c = out.cleaner;
  c.last_sweep_started_at = OptTime(r, row, 5);
  c.last_sweep_finished_at = OptTime(r, row, 6);
  c.last_success_at = OptTime(r, row, 7);
  c.last_deleted_rows = pg::OptInt64(r, row, 8).value_or(0);
  c.total_deleted_rows = pg::OptInt64(r, row, 9).value_or(0);
  c.last_error = std::string(pg::Text(r, row, 10));
  c.claimed_by = std::string(pg::Text(r, row, 11));
  c.claimed_until = OptTime(r, row, 12);
  out.estimated_messages = pg::Int64(r, row, 13);
}

}  // namespace

std::optional<JanitorState::TimePoint> OptTime(const pg::Result& r, int row,
                                               int col) {
  // Clamped here, as Micros clamps in SQL (these columns are read as the
  // shorter ShortMicros): a time the janitor role planted, year 9999 say,
  // would overflow the nanosecond system_clock.
  constexpr std::int64_t kYear1900 = -2208988800LL * 1000000;
  constexpr std::int64_t kYear2200 = 7258118400LL * 1000000;
  const std::optional<std::int64_t> us = pg::OptInt64(r, row, col);
  if (!us) return std::nullopt;
  return FromMicros(std::clamp(*us, kYear1900, kYear2200));
}

bool IsTopicFault(const DatabaseError& e) {
  return e.sqlstate().starts_with("42") || e.sqlstate().starts_with("22");
}

// One statement for all of `topics`: two range descents of each one's
// idle_since index. Apart from the stats statement, which must stay short
// (see StatsSelect). A topic destroyed meanwhile fails the statement
// (42P01); the figures then stay 0 until the next call rather than failing
// the stats.
void CountInvalid(const char* operation, ClientCore& core, pg::Session s,
                  std::span<TopicOverview> topics, bool if_headless) {
  std::string select;
  for (const TopicOverview& t : topics) {
    if (!t.error.empty() || (if_headless && t.stats.headless_rows == 0)) {
      continue;
    }
    if (!select.empty()) select += " UNION ALL ";
    select += "SELECT " + std::to_string(t.info.id) +
              "::bigint, pg_catalog.count(*) FROM " +
              core.HeadTable(t.info.id) +
              " b WHERE b.idle_since = " + kBadBefore + " OR b.idle_since > " +
              kBadAfter;
  }
  if (select.empty()) return;
  pg::Result r;
  try {
    r = pg::ExecScript(s, operation,
                       "SET LOCAL enable_seqscan = off; /* compaction:Stats "
                       "invalid */ " +
                           select);
  } catch (const DatabaseError& e) {
    if (!e.sqlstate().starts_with("42")) throw;
    return;
  }
  std::unordered_map<std::int64_t, std::int64_t> rows;
  for (int row = 0; row < r.rows(); ++row) {
    rows.emplace(pg::Int64(r, row, 0), pg::Int64(r, row, 1));
  }
  for (TopicOverview& t : topics) {
    const auto it = rows.find(t.info.id);
    if (it != rows.end()) t.stats.invalid_timestamp_rows = it->second;
  }
}

void AddCleanerStats(const char* operation, ClientCore& core, pg::Session s,
                     std::span<TopicOverview> topics, bool isolate) {
  std::string ids;
  for (const TopicOverview& t : topics) {
    if (!t.error.empty()) continue;
    ids += ids.empty() ? '{' : ',';
    ids += std::to_string(t.info.id);
  }
  if (ids.empty()) return;
  pg::Result r;
  try {
    r = pg::Exec(s, operation, CleanerSql(core),
                 pg::Params().Add(ids + "}").Add(core.schema()));
  } catch (const DatabaseError& e) {
    // One statement for many topics: one topic's fault would blind them
    // all. Per topic, so that only the faulty one reports it.
    if (!isolate || !IsTopicFault(e)) throw;
    if (topics.size() == 1) {
      topics[0].error = e.what();
      return;
    }
    for (std::size_t i = 0; i < topics.size(); ++i) {
      AddCleanerStats(operation, core, s, topics.subspan(i, 1), isolate);
    }
    return;
  }
  std::unordered_map<std::int64_t, int> rows;
  for (int row = 0; row < r.rows(); ++row) {
    rows.emplace(pg::Int64(r, row, 0), row);
  }
  for (TopicOverview& t : topics) {
    const auto it = rows.find(t.info.id);
    if (t.error.empty() && it != rows.end()) {
      ParseCleaner(r, it->second, t.stats);
    }
  }
}

}  // namespace compaction::detail
