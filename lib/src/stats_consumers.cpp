// The consumers' lag of the topic stats; see stats_parts.hpp.
#include <unordered_map>

#include "rows.hpp"
#include "stats_parts.hpp"

namespace compaction::detail {

void AddConsumerLag(const char* operation, pg::Session s,
                    const ClientCore& core, std::span<TopicOverview> topics,
                    std::int64_t cap) {
  if (topics.empty()) return;
  // The oldest message's age from the server's clock, as the other ages.
  const pg::Result r =
      pg::Exec(s, operation,
               "/* compaction:Stats consumers */ SELECT c.topic, c.consumer, "
               "c.partitions, c.lag_messages, c.capped, CASE WHEN "
               "c.oldest_created_at IS NULL THEN 0 ELSE greatest(0::numeric, "
               "extract(epoch FROM pg_catalog.now() - least(greatest("
               "c.oldest_created_at, '1900-01-01 00:00+00'::timestamptz), "
               "pg_catalog.now())) * 1e3)::bigint END, " +
                   Micros("c.last_poll_at") + ", c.inactive FROM " +
                   core.schema() + ".consumer_lag($1::bigint) c",
               pg::Params().Add(std::to_string(cap)));
  std::unordered_map<std::string, TopicOverview*> by_name;
  for (TopicOverview& t : topics) by_name.emplace(t.info.name, &t);
  for (int row = 0; row < r.rows(); ++row) {
    const auto it = by_name.find(std::string(pg::Text(r, row, 0)));
    if (it == by_name.end()) continue;
    ConsumerLag c;
    c.consumer = std::string(pg::Text(r, row, 1));
    c.partitions = static_cast<int>(pg::Int64(r, row, 2));
    c.lag_messages = pg::Int64(r, row, 3);
    c.lag_messages_capped = pg::Bool(r, row, 4);
    c.lag = std::chrono::milliseconds(pg::Int64(r, row, 5));
    c.last_poll_at = OptTime(r, row, 6);
    c.inactive = pg::Bool(r, row, 7);
    it->second->stats.consumers.push_back(std::move(c));
  }
}

}  // namespace compaction::detail
