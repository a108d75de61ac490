// The janitor on a coordinator and two workers (test/citus/with_cluster.sh):
// the headless sweep and the log cleaner run shard by shard (Citus refuses
// their single-node statements across shards), still in bounded batches
// that skip what a transaction holds.
#include <catch2/catch.hpp>
#include <chrono>
#include <string>

#include "compaction/janitor.hpp"
#include "live_db.hpp"

using compaction::CompactResult;
using compaction::Janitor;
using compaction::SweepResult;
using testing::Counter;
using testing::LiveDb;
using testing::RawConn;
using namespace std::chrono_literals;

namespace {

compaction::TopicConfig SpreadTopic() {
  compaction::TopicConfig config;
  config.partitions = 4;
  config.headless_ttl = 1ms;
  config.retention = 0ms;
  config.tombstone_retention = 0ms;
  return config;
}

// Rows of `table` per worker port, "port:n" joined by spaces, from the
// shards themselves.
std::string PerWorker(RawConn& raw, const std::string& table,
                      const std::string& where) {
  return raw
      .Value(
          "SELECT pg_catalog.string_agg(pg_catalog.concat(s.nodeport, ':', "
          "r.result), ' ' ORDER BY s.nodeport) FROM (SELECT nodeport, "
          "pg_catalog.array_agg(shardid) AS ids FROM pg_catalog.citus_shards "
          "WHERE table_name = pg_catalog.to_regclass($1) GROUP BY nodeport) "
          "s, LATERAL (SELECT pg_catalog.sum(x.result::bigint) AS result "
          "FROM pg_catalog.run_command_on_shards($1, 'SELECT count(*) FROM "
          "%s WHERE ' || $2) x WHERE x.shardid = "
          "ANY (s.ids)) r",
          {table, where})
      .value_or("");
}

}  // namespace

TEST_CASE(
    "the log cleaner and the headless sweep clean every shard in bounded "
    "batches") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>("spread");
  topic.Register(SpreadTopic());
  auto producer = topic.RegisterProducer();
  // 40 keys, three versions each; the last version of 8 keys a tombstone.
  for (int v = 1; v <= 3; ++v) {
    for (int k = 0; k < 40; ++k) {
      const std::string key = "key-" + std::to_string(k);
      if (v == 3 && k < 8) {
        producer.ProduceTombstone(key, compaction::CompactionOptions{v});
      } else {
        producer.Produce(Counter{v}, testing::Compacted(key, v));
      }
    }
  }
  const std::string message = db.MessageTable("spread");
  const std::string head = db.HeadTable("spread");
  RawConn& raw = db.raw();
  REQUIRE(raw.Int("SELECT count(*) FROM " + message) == 120);
  // Both workers hold messages.
  INFO(PerWorker(raw, message, "true"));
  CHECK(PerWorker(raw, message, "true").find(":0") == std::string::npos);

  Janitor janitor(db.client());
  compaction::SweepOptions small;
  small.batch_size = 5;
  CompactResult cleaned;
  for (int pass = 0; pass < 10; ++pass) {
    const CompactResult r = janitor.CompactLog("spread", small);
    cleaned.deleted += r.deleted;
    cleaned.tombstones_expired += r.tombstones_expired;
    cleaned.batches += r.batches;
    if (r.deleted == 0 && r.tombstones_expired == 0) break;
  }
  // Every superseded version and every tombstone went; the 32 heads stay.
  CHECK(cleaned.tombstones_expired == 8);
  CHECK(cleaned.deleted == 88);
  CHECK(cleaned.batches > 2);  // bounded: 5 rows per shard and batch
  CHECK(raw.Int("SELECT count(*) FROM " + message) == 32);
  CHECK(raw.Int("SELECT count(*) FROM " + head + " h JOIN " + message +
                " m ON m.id = h.head_id AND m.partition = h.partition") == 32);
  CHECK(raw.Int("SELECT count(*) FROM " + db.QuotedSchema() +
                ".log_cleaner_state WHERE last_error IS NOT NULL") == 0);
  // The expired tombstones' keys turned headless.
  CHECK(raw.Int("SELECT count(*) FROM " + head + " WHERE head_id IS NULL") ==
        8);

  // More headless rows, on every shard, through the one-call lock.
  for (int k = 0; k < 24; ++k) {
    raw.Query("SELECT " + db.QuotedSchema() + ".lock_" +
              std::to_string(db.TopicId("spread")) + "('idle-" +
              std::to_string(k) + "', false)");
  }
  REQUIRE(raw.Int("SELECT count(*) FROM " + head + " WHERE head_id IS NULL") ==
          32);
  INFO(PerWorker(raw, head, "head_id IS NULL"));
  CHECK(PerWorker(raw, head, "head_id IS NULL").find(":0") ==
        std::string::npos);
  small.batch_size = 3;
  SweepResult swept = janitor.SweepHeadless("spread", small);
  CHECK(swept.deleted == 32);
  CHECK(swept.batches >= 11);  // 3 rows a batch: the cursor walks on
  CHECK(raw.Int("SELECT count(*) FROM " + head + " WHERE head_id IS NULL") ==
        0);
  CHECK(raw.Int("SELECT count(*) FROM " + head) == 32);
}

TEST_CASE(
    "the headless sweep and the cleaner skip a key a transaction holds on "
    "its worker") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>("held");
  topic.Register(SpreadTopic());
  auto producer = topic.RegisterProducer();
  for (int k = 0; k < 12; ++k) {
    const std::string key = "key-" + std::to_string(k);
    producer.Produce(Counter{1}, testing::Compacted(key, 1));
    producer.ProduceTombstone(key, compaction::CompactionOptions{2});
  }
  const std::string s = db.QuotedSchema();
  const std::string id = std::to_string(db.TopicId("held"));
  const std::string head = db.HeadTable("held");
  // A transaction holds key-3 (the library's lock, on its worker).
  RawConn holder;
  holder.Query("BEGIN");
  REQUIRE(holder.Value("SELECT status::text FROM " + s + ".lock_" + id +
                       "('key-3', false)") == "h");

  Janitor janitor(db.client());
  compaction::SweepOptions options;
  options.statement_timeout = 5s;
  const auto start = std::chrono::steady_clock::now();
  const CompactResult cleaned = janitor.CompactLog("held", options);
  CHECK(cleaned.tombstones_expired == 11);
  const SweepResult swept = janitor.SweepHeadless("held", options);
  CHECK(swept.deleted == 11);
  CHECK(std::chrono::steady_clock::now() - start < 4s);  // nothing waited
  holder.Query("COMMIT");
  // Once released, the next passes take it.
  CHECK(janitor.CompactLog("held", options).tombstones_expired == 1);
  CHECK(janitor.SweepHeadless("held", options).deleted == 1);
  CHECK(db.raw().Int("SELECT count(*) FROM " + head) == 0);
}

TEST_CASE("the stats read the shards, not the coordinator's shell tables") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>("sized");
  compaction::TopicConfig config = SpreadTopic();
  config.headless_ttl = 1h;
  topic.Register(config);
  auto producer = topic.RegisterProducer();
  for (int k = 0; k < 200; ++k) {
    const std::string key = "key-" + std::to_string(k);
    producer.Produce(Counter{k}, testing::Compacted(key, 1));
  }
  const std::string id = std::to_string(db.TopicId("sized"));
  for (int k = 0; k < 30; ++k) {
    db.raw().Query("SELECT " + db.QuotedSchema() + ".lock_" + id + "('idle-" +
                   std::to_string(k) + "', false)");
  }
  // Statistics on the shards (ANALYZE through the coordinator would not
  // reach them); the coordinator's shell tables stay empty.
  db.raw().Query(
      "SELECT pg_catalog.run_command_on_shards(t, 'ANALYZE %s') "
      "FROM (VALUES ($1::regclass), ($2::regclass)) v(t)",
      {db.MessageTable("sized"), db.HeadTable("sized")});

  const compaction::TopicStats stats = topic.Stats();
  CHECK(stats.headless_rows == 30);
  CHECK_FALSE(stats.headless_rows_estimated);
  CHECK(stats.oldest_headless_age > 0ms);
  CHECK(stats.estimated_head_rows == 230);
  CHECK(stats.estimated_messages == 200);
  const std::vector<compaction::TopicOverview> listed =
      db.client().ListTopicStats();
  REQUIRE(listed.size() == 1);
  CHECK(listed[0].error.empty());
  CHECK(listed[0].stats.headless_rows == 30);
  CHECK(listed[0].stats.estimated_messages == 200);
}

TEST_CASE(
    "past exact_count_limit the headless rows are estimated from the "
    "shards") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>("backlog");
  compaction::TopicConfig config = SpreadTopic();
  config.headless_ttl = 1h;
  topic.Register(config);
  auto producer = topic.RegisterProducer();
  for (int k = 0; k < 100; ++k) {
    producer.Produce(Counter{k},
                     testing::Compacted("head-" + std::to_string(k)));
  }
  const std::string head = db.HeadTable("backlog");
  testing::InsertHeadless(db.raw(), head, "idle-", 3000, "5 minutes");
  // The workers' statistics (ANALYZE through the coordinator does not
  // reach the shards).
  db.raw().Query("SELECT pg_catalog.run_command_on_shards($1, 'ANALYZE %s')",
                 {head});

  const compaction::TopicStats exact = topic.Stats();
  CHECK(exact.headless_rows == 3000);
  CHECK_FALSE(exact.headless_rows_estimated);
  compaction::StatsOptions options;
  options.exact_count_limit = 10;
  const compaction::TopicStats over = topic.Stats(options);
  CHECK(over.headless_rows_estimated);
  // An estimate from the shards' catalogs (the single-node one summed), not
  // the lower bound limit + 1 (11 before headless_estimate): ANALYZE read
  // every row of these small shards, so it is close.
  INFO("estimated " << over.headless_rows);
  CHECK(over.headless_rows >= 2700);
  CHECK(over.headless_rows <= 3300);
  const auto listed = db.client().ListTopicStats(options);
  REQUIRE(listed.size() == 1);
  CHECK(listed[0].stats.headless_rows == over.headless_rows);
}
