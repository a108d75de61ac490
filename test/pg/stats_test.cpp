// Topic stats against a live database: the headless-row count and oldest
// age, the topic listing, and the plan of the stats query.
#include <catch2/catch.hpp>
#include <thread>

#include "live_db.hpp"

using compaction::CompactionOptions;
using compaction::TopicConfig;
using compaction::TopicStats;
using compaction::Tx;
using testing::Counter;
using testing::LiveDb;
using testing::RawConn;
using testing::InsertHeadless;
using namespace std::chrono_literals;

namespace {

constexpr const char* kStatsMarker = "/* compaction:Stats */";

// Runs a simple-query script (several statements) and returns the first
// column of the last result, one string per row.
std::vector<std::string> Script(RawConn& raw, const std::string& sql) {
  PGresult* r = PQexec(raw.get(), sql.c_str());
  const auto status = PQresultStatus(r);
  std::vector<std::string> rows;
  if (status != PGRES_TUPLES_OK) {
    const std::string error = PQerrorMessage(raw.get());
    PQclear(r);
    FAIL("script failed: " << sql << ": " << error);
  }
  for (int i = 0; i < PQntuples(r); ++i) rows.emplace_back(PQgetvalue(r, i, 0));
  PQclear(r);
  return rows;
}

}  // namespace

TEST_CASE("stats count headless rows and the age of the oldest") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>("counted");
  topic.Register();
  const std::string table = db.HeadTable("counted");
  for (const char* key : {"a", "b", "c"}) {
    db.client().InTransaction(
        [&](Tx& tx) { topic.Key(key).LockCompactionHead(tx); });
  }
  // Materialized heads are not headless rows, whatever their age.
  auto producer = topic.RegisterProducer();
  producer.Produce(Counter{1}, {"m1", CompactionOptions{}});
  producer.Produce(Counter{1}, {"m2", CompactionOptions{}});
  db.raw().Query("UPDATE " + table +
                 " SET updated_at = '2001-01-01' "
                 "WHERE head_id IS NOT NULL");
  db.raw().Query("UPDATE " + table +
                 " SET updated_at = now() - interval "
                 "'5 minutes', idle_since = now() - interval '5 minutes' "
                 "WHERE message_key = 'b'");

  const TopicStats stats = topic.Stats();
  CHECK(stats.headless_rows == 3);
  CHECK(stats.oldest_headless_age >= 5min);
  CHECK(stats.oldest_headless_age < 5min + 30s);
  // The untyped equivalent reads the same.
  const TopicStats untyped = db.client().Stats("counted");
  CHECK(untyped.headless_rows == 3);
  CHECK(untyped.oldest_headless_age >= 5min);

  // Materializing a headless row takes it out of the count.
  producer.Produce(Counter{1}, {"b", CompactionOptions{}});
  const TopicStats after = topic.Stats();
  CHECK(after.headless_rows == 2);
  CHECK(after.oldest_headless_age < 5min);
}

TEST_CASE("the oldest headless age grows with time") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>("aging");
  topic.Register();
  db.client().InTransaction(
      [&](Tx& tx) { topic.Key("k").LockCompactionHead(tx); });
  const auto first = topic.Stats().oldest_headless_age;
  // Not a race ordering, just time passing on the server clock.
  std::this_thread::sleep_for(50ms);
  const auto second = topic.Stats().oldest_headless_age;
  CHECK(second >= first + 50ms);
  CHECK(second < first + 30s);
}

TEST_CASE("stats of a topic without headless rows are zero") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>("empty");
  topic.Register();
  TopicStats stats = topic.Stats();
  CHECK(stats.headless_rows == 0);
  CHECK(stats.oldest_headless_age == 0ms);
  CHECK(stats.janitor.last_error.empty());
  CHECK(stats.janitor.claimed_by.empty());
  CHECK_FALSE(stats.janitor.last_sweep_started_at);

  topic.RegisterProducer().Produce(Counter{1}, {"m", CompactionOptions{}});
  stats = topic.Stats();
  CHECK(stats.headless_rows == 0);
  CHECK(stats.oldest_headless_age == 0ms);
}

TEST_CASE("stats of an unknown topic are a typed error") {
  LiveDb db;
  CHECK_THROWS_AS(db.client().Stats("missing"), compaction::TopicNotFound);
  CHECK_THROWS_AS(db.client().Stats("Bad Name"), compaction::InvalidArgument);
}

TEST_CASE("the stats query reads the partial index, not the head table") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>("plan");
  topic.Register();
  const std::string table = db.HeadTable("plan");
  const std::string id = std::to_string(db.TopicId("plan"));
  InsertHeadless(db.raw(), table, "h-", 100000, "1 hour");
  db.raw().Query("VACUUM ANALYZE " + table);

  CHECK(topic.Stats().headless_rows == 100000);
  // The statement as the library sent it, from its now idle connection.
  const std::string sent = *db.raw().Value(
      "SELECT query FROM pg_stat_activity WHERE state = 'idle' AND "
      "strpos(query, $1) > 0 AND strpos(query, $2) > 0",
      {kStatsMarker, db.schema()});
  // Whole, not cut at track_activity_query_size.
  REQUIRE(sent.ends_with("::regclass"));
  const std::size_t at = sent.find(kStatsMarker);
  REQUIRE(at != std::string::npos);
  const std::string explain = sent.substr(0, at) + "EXPLAIN " + sent.substr(at);
  auto check_plan = [&] {
    std::string plan;
    for (const auto& line : Script(db.raw(), explain)) plan += line + "\n";
    INFO(plan);
    CHECK(plan.find("compaction_head_" + id + "_idle") != std::string::npos);
    CHECK(plan.find("Seq Scan on compaction_head_") == std::string::npos);
  };
  // Only headless rows: a count over all of them is where a sequential
  // scan looks cheapest.
  check_plan();

  // 95 % materialized since. Every key starts headless, so the index file
  // keeps the pages of rows that left it, which makes the index look
  // expensive to the planner; the stats must still not read the heads.
  db.raw().Query("UPDATE " + table +
                 " SET head_id = 1, schema_version = 1, compaction_rank = 0, "
                 "idle_since = NULL WHERE substr(message_key, 3)::int > 5000");
  db.raw().Query("VACUUM ANALYZE " + table);
  const TopicStats stats = topic.Stats();
  CHECK(stats.headless_rows == 5000);
  CHECK(stats.oldest_headless_age >= 1h);
  check_plan();
}

TEST_CASE("ListTopicStats lists every topic with its TTL and stats") {
  LiveDb db;
  auto a = db.client().Topic<Counter>("list-a");
  auto b = db.client().Topic<Counter>("list-b");
  a.Register(TopicConfig{30min});
  b.Register(TopicConfig{2h});
  db.client().InTransaction([&](Tx& tx) {
    a.Key("x").LockCompactionHead(tx);
    a.Key("y").LockCompactionHead(tx);
    b.Key("z").LockCompactionHead(tx);
  });
  const auto all = db.client().ListTopicStats();
  REQUIRE(all.size() == 2);
  CHECK(all[0].info.name == "list-a");
  CHECK(all[0].info.headless_ttl == 30min);
  CHECK(all[0].stats.headless_rows == 2);
  CHECK(all[1].info.name == "list-b");
  CHECK(all[1].info.headless_ttl == 2h);
  CHECK(all[1].stats.headless_rows == 1);
  const auto topics = db.client().ListTopics();
  REQUIRE(topics.size() == 2);
  CHECK(topics[1].headless_ttl == 2h);
}

TEST_CASE("stats follow a topic destroyed and registered again") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>("again");
  topic.Register();
  db.client().InTransaction(
      [&](Tx& tx) { topic.Key("k").LockCompactionHead(tx); });
  CHECK(topic.Stats().headless_rows == 1);
  // Behind the cached id's back, through another client.
  auto other = db.NewClient(1);
  other.Topic<Counter>("again").Destroy();
  other.Topic<Counter>("again").Register();
  CHECK(topic.Stats().headless_rows == 0);
  other.Topic<Counter>("again").Destroy();
  CHECK_THROWS_AS(topic.Stats(), compaction::TopicNotFound);
}
