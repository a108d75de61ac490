// Topic stats: one query over the idle_since partial index plus the
// janitor's row.
#include "compaction/client.hpp"
#include "core.hpp"
#include "rows.hpp"
#include "topics.hpp"

namespace compaction::detail {
namespace {

constexpr const char* kOp = "Stats";

std::optional<JanitorState::TimePoint> OptTime(const PGresult* r, int row,
                                               int col) {
  const std::optional<std::int64_t> us = pg::OptInt64(r, row, col);
  if (!us) return std::nullopt;
  return FromMicros(*us);
}

// The count and min() read only the partial index (an index-only scan once
// the visibility map is current), never the materialized heads. Literals
// instead of parameters because the statement runs as a simple-query script
// behind its SET LOCAL; both come from the numeric topic id.
std::string StatsSql(const ClientCore& core, pg::Session s, std::int64_t id) {
  return "/* compaction:Stats */ SELECT s.headless, s.oldest_ms, "
         "greatest(c.reltuples, 0)::bigint, " +
         Micros("j.last_sweep_started_at") + ", " +
         Micros("j.last_sweep_finished_at") + ", " +
         Micros("j.last_success_at") +
         ", coalesce(j.last_deleted_rows, 0), "
         "coalesce(j.total_deleted_rows, 0), coalesce(j.last_error, ''), "
         "CASE WHEN j.claimed_until > now() THEN j.claimed_by ELSE '' END, "
         "CASE WHEN j.claimed_until > now() THEN " +
         Micros("j.claimed_until") +
         " END FROM (SELECT count(*) AS headless, coalesce((extract(epoch FROM "
         "now() - min(h.idle_since)) * 1000)::bigint, 0) AS oldest_ms FROM " +
         core.HeadTable(id) +
         " h WHERE h.idle_since IS NOT NULL) s "
         "CROSS JOIN pg_class c LEFT JOIN " +
         core.schema() +
         ".janitor_state j ON j.topic_id = " + std::to_string(id) +
         " WHERE c.oid = " + pg::QuoteLiteral(s.conn, core.HeadTable(id)) +
         "::regclass";
}

TopicStats ParseStats(const PGresult* r) {
  TopicStats out;
  out.headless_rows = pg::Int64(r, 0, 0);
  // Clamped: a row created by a transaction that started after ours reads
  // as slightly negative age.
  out.oldest_headless_age =
      std::chrono::milliseconds(std::max<std::int64_t>(0, pg::Int64(r, 0, 1)));
  out.estimated_head_rows = pg::Int64(r, 0, 2);
  out.janitor.last_sweep_started_at = OptTime(r, 0, 3);
  out.janitor.last_sweep_finished_at = OptTime(r, 0, 4);
  out.janitor.last_success_at = OptTime(r, 0, 5);
  out.janitor.last_deleted_rows = pg::Int64(r, 0, 6);
  out.janitor.total_deleted_rows = pg::Int64(r, 0, 7);
  out.janitor.last_error = std::string(pg::Text(r, 0, 8));
  out.janitor.claimed_by = std::string(pg::Text(r, 0, 9));
  out.janitor.claimed_until = OptTime(r, 0, 10);
  return out;
}

// The planner prices the partial index by its file size, which keeps the
// pages of rows that were headless once (every key starts headless), and by
// statistics that lag; either easily tips it into a sequential scan of all
// heads, whose cost grows with the materialized rows instead of the
// headless ones. Turned off for this one statement (SET LOCAL in the
// script's implicit transaction), a sequential scan remains the fallback
// should the index ever be missing.
TopicStats QueryStats(ClientCore& core, pg::Session s, const TopicInfo& t) {
  pg::Result r = pg::ExecScript(
      s.conn, kOp,
      "SET LOCAL enable_seqscan = off; " + StatsSql(core, s, t.id));
  return ParseStats(r.get());
}

}  // namespace

TopicStats GetTopicStats(ClientCore& core, const std::string& topic) {
  return WithTopic(core, kOp, topic, [&](pg::Session s, const TopicInfo& t) {
    return QueryStats(core, s, t);
  });
}

}  // namespace compaction::detail

namespace compaction {

TopicStats Client::Stats(const std::string& topic_name) const {
  return detail::GetTopicStats(*core_, topic_name);
}

std::vector<TopicOverview> Client::ListTopicStats() const {
  std::vector<TopicOverview> out;
  for (TopicInfo& topic : ListTopics()) {
    try {
      TopicStats stats = Stats(topic.name);
      out.push_back(TopicOverview{std::move(topic), std::move(stats)});
    } catch (const TopicNotFound&) {
      // Destroyed since the listing: it is no longer a topic to report.
    }
  }
  return out;
}

}  // namespace compaction
