// Topic stats: per topic one statement over the idle_since partial index
// plus the janitor's row; ListTopicStats batches many topics per statement.
#include <algorithm>
#include <limits>
#include <span>
#include <unordered_map>

#include "compaction/client.hpp"
#include "core.hpp"
#include "rows.hpp"
#include "schema.hpp"
#include "stats_parts.hpp"
#include "topics.hpp"

namespace compaction::detail {
namespace {

constexpr const char* kOp = "Stats";
constexpr const char* kListOp = "ListTopicStats";

// Topics per ListTopicStats statement. One UNION ALL statement per chunk
// rather than libpq pipeline mode: it keeps the SET LOCAL below in one
// implicit transaction with the query (a pipeline of extended-protocol
// statements would need a session-level SET and RESET on a pooled
// connection), and it needs no libpq code outside lib/src/pg. Small chunks
// because the server's cost per topic (opening, locking and planning its
// head table and indexes, about 0.5 ms here) is what a listing pays, not
// the round trips, and it grows with the branches of one statement: at
// 1,007 topics 64 per statement took 1.7 s, 8 per statement 0.7 s, one
// per topic 0.6-0.8 s (noisy, shared 2-core machine).
constexpr std::size_t kTopicsPerStatement = 8;

// Result columns of StatsSelect, in order.
enum Col {
  kTopicId,
  kVersion,
  kCounted,
  kOldestMs,
  kHeadRows,
  kSweepStarted,
  kSweepFinished,
  kSuccess,
  kLastDeleted,
  kTotalDeleted,
  kLastError,
  kClaimedBy,
  kClaimedUntil,
  kFingerprint,  // with_version only
};

void ValidateStatsOptions(const char* operation, const StatsOptions& options) {
  // limit + 1 must fit the bigint LIMIT below.
  if (options.exact_count_limit <= 0 ||
      options.exact_count_limit == std::numeric_limits<std::int64_t>::max()) {
    throw InvalidArgument(
        operation,
        "exact_count_limit must be in 1.." +
            std::to_string(std::numeric_limits<std::int64_t>::max() - 1) +
            ", got " + std::to_string(options.exact_count_limit));
  }
}

// One topic's stats row (columns as in Col). Literals instead of
// parameters because the statement runs as a simple-query script behind its
// SET LOCAL; every identifier and literal comes from the numeric topic id.
//
// The count reads at most limit + 1 entries of the partial index (an
// index-only scan once the visibility map is current) and never the
// materialized heads: an exact count(*) of a million headless rows took
// 106 ms even in parallel, against about a tenth of that for the first
// 100,000. Reading one entry past the limit tells "exactly limit" from
// "more". The oldest row is a separate subquery, one descent at the low end
// of the same index: next to count(*), min() would be one more aggregate
// over the counted entries, and over only those.
//
// Kept short (NULLs are defaulted in ParseStats, not by coalesce) so that a
// single topic's statement shows whole in pg_stat_activity at the default
// track_activity_query_size of 1 kB, for a schema name of up to 11
// characters (the default "compaction" included: the name appears four
// times). The tests' server raises the size (deploy/local/pg.sh), since
// their schema names are longer. `with_version` adds the topic's
// baseline version, for topics that come from a listing rather than from
// ResolveTopic, which checks it.
std::string StatsSelect(const ClientCore& core, pg::Session s, std::int64_t id,
                        std::int64_t limit, bool with_version) {
  const std::string ids = std::to_string(id);
  const std::string head = core.HeadTable(id);
  const std::string janitor =
      " LEFT JOIN " + core.schema() +
      ".janitor_state j ON j.topic_id = " + ids +
      (with_version ? " LEFT JOIN " + core.schema() +
                          ".schema_version v ON v.topic_id = " + ids
                    : std::string());
  // On Citus the head table is a shell on the coordinator: Citus refuses
  // this join of it with local tables and catalogs (42601), and its
  // pg_class row says nothing of the shards. head_stats (sql/citus_v1.sql)
  // reads the same figures in statements of their own, the rows from the
  // shards' catalogs.
  const bool citus = core.citus();
  const std::string oldest =
      citus ? "c.oldest_idle_since"
            : "(SELECT o.idle_since FROM " + head + " o WHERE o.idle_since > " +
                  kBadBefore + " ORDER BY o.idle_since LIMIT 1)";
  const std::string from =
      citus ? " FROM " + core.schema() + ".head_stats(" + ids + "::bigint, " +
                  std::to_string(limit + 1) + "::bigint) c" + janitor
            : " FROM (SELECT pg_catalog.count(*) n FROM (SELECT FROM " + head +
                  " h WHERE h.idle_since IS NOT NULL LIMIT " +
                  std::to_string(limit + 1) +
                  ") l) c CROSS JOIN pg_catalog.pg_class hc" + janitor +
                  " WHERE hc.oid = " + pg::QuoteLiteral(s.conn, head, kOp) +
                  "::regclass::oid";
  // The claim's end is read only with its owner, who is NULL unless the
  // claim still holds; reltuples is -1 before the first VACUUM or ANALYZE
  // (ParseStats reads it as 0).
  return "SELECT " + ids + "::bigint, " +
         (with_version ? "v.version" : "NULL") + ", " +
         (citus ? "c.headless" : "c.n") +
         ", (extract(epoch FROM pg_catalog.now() - " + oldest +
         ") * 1e3)::bigint, " +
         (citus ? "c.head_rows" : "hc.reltuples::bigint") + ", " +
         ShortMicros("j.last_sweep_started_at") + ", " +
         ShortMicros("j.last_sweep_finished_at") + ", " +
         ShortMicros("j.last_success_at") +
         ", j.last_deleted_rows, j.total_deleted_rows, j.last_error, "
         "CASE WHEN j.claimed_until > pg_catalog.now() THEN j.claimed_by "
         "END, " +
         ShortMicros("j.claimed_until") +
         (with_version ? ", pg_catalog.to_jsonb(v) ->> 'fingerprint'" : "") +
         from;
}

// Estimates for the topics whose count stopped at the limit: what the
// planner itself would assume, a relation's tuple density at its last
// statistics update times its current size (plain reltuples would stay at
// the last figure while a backlog grows: 100,000 reported for 1,000,000 rows
// loaded since). First the partial index's own density; ANALYZE (and
// autoanalyze) sets its reltuples from the sample, but an insert-only
// VACUUM leaves it untouched, -1 on a never-analyzed index. Failing that,
// the head table's density times the headless fraction ANALYZE measured
// (1 - null_frac of idle_since), which is how the planner sizes
// `idle_since IS NOT NULL`. Without any statistics it is 0 and the caller
// reports limit + 1, a true lower bound.
//
// A statement of its own, run only when some count hit the limit, so the
// common path stays one short statement per topic (short enough to show
// whole in pg_stat_activity). It only reads catalogs: to_regclass and
// pg_relation_size return NULL for a table dropped meanwhile, so it cannot
// fail on a destroyed topic.
constexpr const char* kEstimateSql =
    "/* compaction:Stats estimate */ SELECT t.id, coalesce("
    // The index also keeps dead entries of keys that left the headless
    // state, so its growth can overstate the backlog: never more than the
    // head table's own estimate of all its rows.
    "CASE WHEN e.idx IS NOT NULL THEN least(e.idx, e.all_rows) END, "
    "e.all_rows * e.share, 0)::bigint "
    "FROM pg_catalog.unnest($1::bigint[]) t(id) "
    "CROSS JOIN (SELECT pg_catalog.current_setting('block_size')::bigint "
    "AS size) b "
    "LEFT JOIN pg_catalog.pg_class hc ON hc.oid = pg_catalog.to_regclass("
    "$2::text || '.compaction_head_' || t.id::text)::oid "
    "LEFT JOIN pg_catalog.pg_class ic ON ic.oid = pg_catalog.to_regclass("
    "$2::text || '.compaction_head_' || t.id::text || '_idle')::oid "
    "CROSS JOIN LATERAL (SELECT "
    "CASE WHEN ic.relpages > 0 AND ic.reltuples > 0::float4 THEN "
    "ic.reltuples::float8 / ic.relpages::float8 * (pg_catalog.pg_relation_size("
    "ic.oid::regclass) / b.size)::float8 END AS idx, "
    "CASE WHEN hc.relpages > 0 AND hc.reltuples > 0::float4 THEN "
    "hc.reltuples::float8 / hc.relpages::float8 * (pg_catalog.pg_relation_size("
    "hc.oid::regclass) / b.size)::float8 END AS all_rows, "
    // Correlated on relname so pg_stats is read by index; a join on the
    // computed name scanned all of pg_statistic (70 ms at 1,000 topics).
    "(SELECT 1::float8 - st.null_frac::float8 FROM pg_catalog.pg_stats st "
    "WHERE st.schemaname = $3::name "
    "AND st.tablename = hc.relname AND st.attname = 'idle_since' "
    "AND NOT st.inherited) AS share) e";

// Replaces the counts that stopped at the limit by their estimates.
void EstimateOverLimit(const char* operation, ClientCore& core, pg::Session s,
                       std::span<TopicOverview> topics, std::int64_t limit) {
  std::string ids;
  for (const TopicOverview& t : topics) {
    if (!t.stats.headless_rows_estimated) continue;
    ids += ids.empty() ? '{' : ',';
    ids += std::to_string(t.info.id);
  }
  if (ids.empty()) return;
  // On Citus the coordinator's catalogs hold empty shells: the same
  // estimate per shard, summed (headless_estimate, sql/citus_v1.sql).
  pg::Result r =
      core.citus() ? pg::Exec(s, operation,
                              "/* compaction:Stats estimate */ SELECT t.id, " +
                                  core.schema() +
                                  ".headless_estimate(t.id) FROM "
                                  "pg_catalog.unnest($1::bigint[]) t(id)",
                              pg::Params().Add(ids + "}"))
                   : pg::Exec(s, operation, kEstimateSql,
                              pg::Params()
                                  .Add(ids + "}")
                                  .Add(core.schema())
                                  .Add(core.options().schema));
  std::unordered_map<std::int64_t, std::int64_t> estimate;
  for (int row = 0; row < r.rows(); ++row) {
    estimate.emplace(pg::Int64(r, row, 0), pg::Int64(r, row, 1));
  }
  for (TopicOverview& t : topics) {
    if (!t.stats.headless_rows_estimated) continue;
    const auto it = estimate.find(t.info.id);
    if (it != estimate.end()) {
      t.stats.headless_rows = std::max(limit + 1, it->second);
    }
  }
}

// The headless rows' and the janitor's figures of `from` into `to`.
void CopyHeadless(const TopicStats& from, TopicStats& to) {
  to.headless_rows = from.headless_rows;
  to.headless_rows_estimated = from.headless_rows_estimated;
  to.oldest_headless_age = from.oldest_headless_age;
  to.estimated_head_rows = from.estimated_head_rows;
  to.janitor = from.janitor;
}

// The planner prices the partial index by its file size, which keeps the
// pages of rows that were headless once (every key starts headless), and by
// statistics that lag; either easily tips it into a sequential scan of all
// heads, whose cost grows with the materialized rows instead of the
// headless ones (a LIMIT makes a sequential scan look cheaper still: it
// expects to stop early). Turned off for this one statement (SET LOCAL in
// the script's implicit transaction), a sequential scan remains the
// fallback should the index ever be missing.
std::string StatsScript(const char* marker, const std::string& select) {
  return "SET LOCAL enable_seqscan = off; /* compaction:" +
         std::string(marker) + " */ " + select;
}

TopicStats ParseStats(const char* operation, const TopicInfo& topic,
                      const pg::Result& r, int row, std::int64_t limit,
                      bool with_version) {
  if (with_version) {
    // The same gate as ResolveTopic.
    const int found =
        static_cast<int>(pg::OptInt64(r, row, kVersion).value_or(0));
    std::optional<std::string_view> fingerprint;
    if (!pg::IsNull(r, row, kFingerprint)) {
      fingerprint = pg::Text(r, row, kFingerprint);
    }
    CheckTopicBaseline(operation, topic.name, found, fingerprint);
  }
  TopicStats out;
  const std::int64_t counted = pg::Int64(r, row, kCounted);
  // Above the limit: limit + 1 until EstimateOverLimit knows better.
  out.headless_rows_estimated = counted > limit;
  out.headless_rows = counted;
  // Clamped: a row created by a transaction that started after ours reads
  // as slightly negative age.
  out.oldest_headless_age = std::chrono::milliseconds(
      std::max<std::int64_t>(0, pg::OptInt64(r, row, kOldestMs).value_or(0)));
  out.estimated_head_rows =
      std::max<std::int64_t>(0, pg::Int64(r, row, kHeadRows));
  out.janitor.last_sweep_started_at = OptTime(r, row, kSweepStarted);
  out.janitor.last_sweep_finished_at = OptTime(r, row, kSweepFinished);
  out.janitor.last_success_at = OptTime(r, row, kSuccess);
  // NULL (no janitor_state row) reads as 0 and "".
  out.janitor.last_deleted_rows =
      pg::OptInt64(r, row, kLastDeleted).value_or(0);
  out.janitor.total_deleted_rows =
      pg::OptInt64(r, row, kTotalDeleted).value_or(0);
  out.janitor.last_error = std::string(pg::Text(r, row, kLastError));
  if (!pg::IsNull(r, row, kClaimedBy)) {  // a claim that still holds
    out.janitor.claimed_by = std::string(pg::Text(r, row, kClaimedBy));
    out.janitor.claimed_until = OptTime(r, row, kClaimedUntil);
  }
  return out;
}

TopicStats QueryStats(const char* operation, ClientCore& core, pg::Session s,
                      const TopicInfo& t, std::int64_t limit,
                      bool with_version) {
  pg::Result r = pg::ExecScript(
      s, operation,
      StatsScript("Stats", StatsSelect(core, s, t.id, limit, with_version)));
  return ParseStats(operation, t, r, 0, limit, with_version);
}

bool TopicExists(ClientCore& core, pg::Session s, std::int64_t id) {
  try {
    pg::Result r = pg::Exec(
        s, kListOp, "SELECT 1 FROM " + core.schema() + ".topic WHERE id = $1",
        pg::Params().Add(id));
    return r.rows() > 0;
  } catch (const DatabaseError& e) {
    RethrowSchemaMissing(core, kListOp, e);
  }
}

// A topic listed with why its stats could not be read. Built member by
// member: GCC 12 at -O3 warns (-Wmaybe-uninitialized) about the moved
// strings of an aggregate's value-initialized TopicStats temporary.
TopicOverview Unreadable(TopicInfo&& t, const char* why) {
  TopicOverview out;
  out.info = std::move(t);
  out.error = why;
  return out;
}

// Appends one topic's stats to `out`, on its own statement. A topic whose
// row is gone was destroyed meanwhile and is left out; one that still
// exists but cannot be read (tables missing or altered by hand, another
// baseline, no privilege) is listed with its error, so it cannot take the
// stats of every other topic down with it.
void ListOne(ClientCore& core, pg::Session s, TopicInfo& t, std::int64_t limit,
             std::vector<TopicOverview>& out) {
  try {
    TopicStats stats =
        QueryStats(kListOp, core, s, t, limit, /*with_version=*/true);
    out.push_back(TopicOverview{std::move(t), std::move(stats), {}});
  } catch (const SchemaVersionMismatch& e) {
    out.push_back(Unreadable(std::move(t), e.what()));
  } catch (const DatabaseError& e) {
    if (!IsTopicFault(e)) throw;
    if (TopicExists(core, s, t.id)) {
      out.push_back(Unreadable(std::move(t), e.what()));
    }
  }
}

// Appends the stats of `chunk` to `out`, in the chunk's order.
void ListChunk(ClientCore& core, pg::Session s, std::span<TopicInfo> chunk,
               std::int64_t limit, std::vector<TopicOverview>& out) {
  std::string select;
  for (const TopicInfo& t : chunk) {
    if (!select.empty()) select += " UNION ALL ";
    select += StatsSelect(core, s, t.id, limit, /*with_version=*/true);
  }
  pg::Result r;
  try {
    r = pg::ExecScript(s, kListOp, StatsScript(kListOp, select));
  } catch (const DatabaseError& e) {
    if (!IsTopicFault(e)) throw;
    // A topic of the chunk was destroyed since the listing (its DROP TABLE
    // fails the whole statement at parse time), or one is broken. Per
    // topic, so the others still report.
    for (TopicInfo& t : chunk) ListOne(core, s, t, limit, out);
    return;
  }
  std::unordered_map<std::int64_t, int> rows;
  for (int row = 0; row < r.rows(); ++row) {
    rows.emplace(pg::Int64(r, row, kTopicId), row);
  }
  for (TopicInfo& t : chunk) {
    const auto it = rows.find(t.id);
    if (it == rows.end()) {
      // Only when the head table's pg_class row vanished under the
      // statement's snapshot: destroyed, like the 42P01 case.
      continue;
    }
    try {
      TopicStats stats = ParseStats(kListOp, t, r, it->second, limit,
                                    /*with_version=*/true);
      out.push_back(TopicOverview{std::move(t), std::move(stats), {}});
    } catch (const SchemaVersionMismatch& e) {
      out.push_back(Unreadable(std::move(t), e.what()));
    }
  }
}

std::vector<TopicOverview> ListStats(ClientCore& core,
                                     std::vector<TopicInfo> topics,
                                     const StatsOptions& options) {
  std::vector<TopicOverview> out;
  if (topics.empty()) return out;
  out.reserve(topics.size());
  WithConnection(core, kListOp, [&](pg::Session s) {
    std::span<TopicInfo> rest(topics);
    while (!rest.empty()) {
      const std::size_t n = std::min(rest.size(), kTopicsPerStatement);
      const std::size_t start = out.size();
      ListChunk(core, s, rest.first(n), options.exact_count_limit, out);
      EstimateOverLimit(kListOp, core, s, std::span(out).subspan(start),
                        options.exact_count_limit);
      CountInvalid(kListOp, core, s, std::span(out).subspan(start),
                   /*if_headless=*/true);
      AddCleanerStats(kListOp, core, s, std::span(out).subspan(start),
                      /*isolate=*/true);
      rest = rest.subspan(n);
    }
    try {
      AddConsumerLag(kListOp, s, core, out, options.exact_count_limit);
    } catch (const DatabaseError& e) {
      // The refresh's costliest statement, one for every topic: its
      // failure blinds the consumers' figures only.
      for (TopicOverview& t : out) t.stats.consumers_error = e.what();
    }
  });
  return out;
}

}  // namespace

TopicStats GetTopicStats(ClientCore& core, const std::string& topic,
                         const StatsOptions& options) {
  ValidateStatsOptions(kOp, options);
  return WithTopic(core, kOp, topic, [&](pg::Session s, const TopicInfo& t) {
    TopicOverview one{t, {}, {}};
    // The log's figures first, so that the headless statement is the
    // connection's last (what pg_stat_activity shows of it).
    AddCleanerStats(kOp, core, s, std::span(&one, 1), /*isolate=*/false);
    CountInvalid(kOp, core, s, std::span(&one, 1), /*if_headless=*/false);
    const TopicStats headless = QueryStats(
        kOp, core, s, t, options.exact_count_limit, /*with_version=*/false);
    CopyHeadless(headless, one.stats);
    EstimateOverLimit(kOp, core, s, std::span(&one, 1),
                      options.exact_count_limit);
    return std::move(one.stats);
  });
}

}  // namespace compaction::detail

namespace compaction {

TopicStats Client::Stats(const std::string& topic_name,
                         const StatsOptions& options) const {
  return detail::GetTopicStats(*core_, topic_name, options);
}

std::vector<TopicOverview> Client::ListTopicStats(
    const StatsOptions& options) const {
  detail::ValidateStatsOptions(detail::kListOp, options);
  return detail::ListStats(*core_, ListTopics(), options);
}

}  // namespace compaction
