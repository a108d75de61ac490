// Topic stats against a live database: the headless-row count (exact up to
// the limit, estimated above it) and oldest age, the batched topic listing,
// and the plan of the stats query.
#include <catch2/catch.hpp>
#include <future>
#include <limits>
#include <map>
#include <thread>

#include "consumer_support.hpp"
#include "live_db.hpp"

using compaction::CompactionOptions;
using compaction::StatsOptions;
using compaction::TopicConfig;
using compaction::TopicStats;
using compaction::Tx;
using testing::Counter;
using testing::InsertHeadless;
using testing::LiveDb;
using testing::RawConn;
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

TEST_CASE("stats count headless rows and the age of the oldest", "[stats]") {
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

TEST_CASE("the oldest headless age grows with time", "[stats]") {
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

TEST_CASE("stats of a topic without headless rows are zero", "[stats]") {
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

TEST_CASE("stats of an unknown topic are a typed error", "[stats]") {
  LiveDb db;
  CHECK_THROWS_AS(db.client().Stats("missing"), compaction::TopicNotFound);
  CHECK_THROWS_AS(db.client().Stats("Bad Name"), compaction::InvalidArgument);
}

TEST_CASE("the stats query reads the partial index, not the head table",
          "[stats]") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>("plan");
  topic.Register();
  const std::string table = db.HeadTable("plan");
  const std::string id = std::to_string(db.TopicId("plan"));
  InsertHeadless(db.raw(), table, "h-", 100000, "1 hour");
  db.raw().Query("VACUUM ANALYZE " + table);

  CHECK(topic.Stats({.exact_count_limit = 100000}).headless_rows == 100000);
  // The statement as the library sent it, from its now idle connection.
  const std::string sent = *db.raw().Value(
      "SELECT query FROM pg_stat_activity WHERE state = 'idle' AND "
      "strpos(query, $1) > 0 AND strpos(query, $2) > 0",
      {kStatsMarker, db.schema()});
  // Whole, not cut at track_activity_query_size.
  INFO("sent " << sent.size() << " bytes: " << sent);
  REQUIRE(sent.ends_with("::regclass::oid"));
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

TEST_CASE("ListTopicStats lists every topic with its TTL and stats",
          "[stats]") {
  LiveDb db;
  auto a = db.client().Topic<Counter>("list-a");
  auto b = db.client().Topic<Counter>("list-b");
  a.Register(testing::Ttl(30min));
  b.Register(testing::Ttl(2h));
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

TEST_CASE("stats follow a topic destroyed and registered again", "[stats]") {
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

TEST_CASE("stats count exactly up to the limit and estimate above it",
          "[stats]") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>("capped");
  topic.Register();
  const std::string table = db.HeadTable("capped");
  InsertHeadless(db.raw(), table, "old-", 1, "3 hours");
  InsertHeadless(db.raw(), table, "h-", 49, "1 minute");
  // Materialized heads count for nothing, below or above the limit.
  auto producer = topic.RegisterProducer();
  for (int i = 0; i < 20; ++i) {
    producer.Produce(Counter{i},
                     {"m" + std::to_string(i), CompactionOptions{}});
  }
  auto check_age = [](const TopicStats& s) {
    CHECK(s.oldest_headless_age >= 3h);
    CHECK(s.oldest_headless_age < 3h + 30s);
  };

  const TopicStats deflt = topic.Stats();
  CHECK(deflt.headless_rows == 50);
  CHECK_FALSE(deflt.headless_rows_estimated);
  check_age(deflt);
  // Exactly at the limit is still exact.
  const TopicStats at = topic.Stats(StatsOptions{.exact_count_limit = 50});
  CHECK(at.headless_rows == 50);
  CHECK_FALSE(at.headless_rows_estimated);
  check_age(at);

  // No statistics yet (never analyzed): the lower bound the count proved.
  const TopicStats over = topic.Stats(StatsOptions{.exact_count_limit = 10});
  CHECK(over.headless_rows_estimated);
  CHECK(over.headless_rows >= 11);
  check_age(over);
  const TopicStats just =
      db.client().Stats("capped", StatsOptions{.exact_count_limit = 49});
  CHECK(just.headless_rows_estimated);
  CHECK(just.headless_rows >= 50);
  check_age(just);

  // With current statistics the estimate is the planner's, here exact (the
  // ANALYZE sample holds every row).
  db.raw().Query("ANALYZE " + table);
  const TopicStats analyzed =
      topic.Stats(StatsOptions{.exact_count_limit = 10});
  CHECK(analyzed.headless_rows_estimated);
  CHECK(analyzed.headless_rows == 50);
  check_age(analyzed);

  // Fresh statistics again at 2,050 rows: exact once more.
  InsertHeadless(db.raw(), table, "more-", 2000, "1 minute");
  db.raw().Query("ANALYZE " + table);
  const TopicStats fresh = topic.Stats(StatsOptions{.exact_count_limit = 10});
  CHECK(fresh.headless_rows_estimated);
  CHECK(fresh.headless_rows == 2050);
  check_age(fresh);
  // Ten times the rows since: the estimate follows the index's growth (its
  // current size times the density seen at the ANALYZE), roughly.
  InsertHeadless(db.raw(), table, "most-", 18000, "1 minute");
  const TopicStats grown = topic.Stats(StatsOptions{.exact_count_limit = 10});
  CHECK(grown.headless_rows_estimated);
  INFO("estimate at 20,050 rows: " << grown.headless_rows);
  CHECK(grown.headless_rows > 8000);
  CHECK(grown.headless_rows < 50000);
  check_age(grown);
  // The exact count does not depend on statistics.
  const TopicStats exact =
      topic.Stats(StatsOptions{.exact_count_limit = 100000});
  CHECK(exact.headless_rows == 20050);
  CHECK_FALSE(exact.headless_rows_estimated);
  check_age(exact);
}

TEST_CASE("stats reject a bad exact_count_limit before any I/O", "[stats]") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>("bad-option");
  topic.Register();
  for (std::int64_t bad : {std::int64_t{0}, std::int64_t{-1},
                           std::numeric_limits<std::int64_t>::min(),
                           std::numeric_limits<std::int64_t>::max()}) {
    INFO("exact_count_limit " << bad);
    const StatsOptions o{.exact_count_limit = bad};
    CHECK_THROWS_AS(topic.Stats(o), compaction::InvalidArgument);
    // Not TopicNotFound: the option is checked before the topic is looked up.
    CHECK_THROWS_AS(db.client().Stats("missing", o),
                    compaction::InvalidArgument);
    CHECK_THROWS_AS(db.client().ListTopicStats(o), compaction::InvalidArgument);
  }
  // Not SchemaVersionMismatch: nothing is read from an uninstalled schema.
  auto elsewhere = compaction::Client::Connect(
      "", compaction::ClientOptions{.schema = db.schema() + "_absent"});
  CHECK_THROWS_AS(
      elsewhere.ListTopicStats(StatsOptions{.exact_count_limit = 0}),
      compaction::InvalidArgument);
  CHECK_THROWS_AS(elsewhere.ListTopicStats(),
                  compaction::SchemaVersionMismatch);
  CHECK(topic.Stats(StatsOptions{.exact_count_limit = 1}).headless_rows == 0);
}

namespace {

std::string TopicName(int i) {
  char name[16];
  std::snprintf(name, sizeof name, "many-%03d", i);
  return name;
}

// Topics spanning many ListTopicStats statements, topic i with i % 7
// headless rows, the oldest i minutes old.
void RegisterMany(LiveDb& db, int n) {
  for (int i = 0; i < n; ++i) {
    db.client().Topic<Counter>(TopicName(i)).Register();
    if (i % 7 == 0) continue;
    const std::string table = db.HeadTable(TopicName(i));
    InsertHeadless(db.raw(), table, "old-", 1, std::to_string(i) + " minutes");
    InsertHeadless(db.raw(), table, "new-", i % 7 - 1, "1 second");
  }
}

void CheckMatches(LiveDb& db, const std::vector<compaction::TopicOverview>& all,
                  const StatsOptions& options) {
  for (const auto& t : all) {
    INFO("topic " << t.info.name);
    const TopicStats one = db.client().Stats(t.info.name, options);
    CHECK(t.info.id == db.TopicId(t.info.name));
    CHECK(t.stats.headless_rows == one.headless_rows);
    CHECK(t.stats.headless_rows_estimated == one.headless_rows_estimated);
    CHECK(t.stats.estimated_head_rows == one.estimated_head_rows);
    // Read a moment apart.
    CHECK(one.oldest_headless_age >= t.stats.oldest_headless_age);
    CHECK(one.oldest_headless_age < t.stats.oldest_headless_age + 30s);
    CHECK(t.stats.janitor.total_deleted_rows == one.janitor.total_deleted_rows);
    CHECK(t.stats.janitor.last_error == one.janitor.last_error);
  }
}

}  // namespace

TEST_CASE("ListTopicStats over many topics matches per-topic stats",
          "[stats]") {
  LiveDb db;
  constexpr int kTopics = 120;
  RegisterMany(db, kTopics);
  // Some janitor history to carry through.
  compaction::Janitor(db.client()).SweepHeadless(TopicName(13));

  const auto all = db.client().ListTopicStats();
  REQUIRE(all.size() == kTopics);
  for (int i = 0; i < kTopics; ++i) {
    INFO("topic " << i);
    CHECK(all[i].info.name == TopicName(i));
    CHECK(all[i].stats.headless_rows == i % 7);
    CHECK_FALSE(all[i].stats.headless_rows_estimated);
    if (i % 7 != 0) {
      CHECK(all[i].stats.oldest_headless_age >= std::chrono::minutes(i));
    } else {
      CHECK(all[i].stats.oldest_headless_age == 0ms);
    }
  }
  CHECK(all[13].stats.janitor.last_success_at);
  CheckMatches(db, all, {});

  // The limit applies per topic, in the batch as alone.
  const StatsOptions small{.exact_count_limit = 3};
  const auto capped = db.client().ListTopicStats(small);
  REQUIRE(capped.size() == kTopics);
  for (int i = 0; i < kTopics; ++i) {
    INFO("topic " << i);
    CHECK(capped[i].stats.headless_rows_estimated == (i % 7 > 3));
    CHECK(capped[i].stats.headless_rows >= std::min(i % 7, 4));
  }
  CheckMatches(db, capped, small);
}

TEST_CASE("stats listing leaves out a topic destroyed while it runs",
          "[stats]") {
  LiveDb db;
  constexpr int kTopics = 120;
  RegisterMany(db, kTopics);
  const std::string victim = TopicName(90);  // not in the first statement
  const std::int64_t victim_id = db.TopicId(victim);

  // What Destroy does, held open: the listing still sees the topic row, and
  // the stats statement then waits on the DROP's lock of the head table.
  RawConn destroyer;
  destroyer.Query("BEGIN");
  destroyer.Query("DELETE FROM " + db.QuotedSchema() +
                  ".topic WHERE id = " + std::to_string(victim_id));
  destroyer.Query("DROP TABLE " + db.HeadTable(victim) + ", " +
                  db.MessageTable(victim));
  auto listing = std::async(std::launch::async,
                            [&] { return db.client().ListTopicStats(); });
  const bool waited = testing::WaitForLockWait(
      db.raw(), "/* compaction:ListTopicStats */", db.schema());
  destroyer.Query("COMMIT");
  REQUIRE(waited);
  const auto all = listing.get();
  REQUIRE(all.size() == kTopics - 1);
  std::map<std::string, std::int64_t> rows;
  for (const auto& t : all) rows[t.info.name] = t.stats.headless_rows;
  CHECK(rows.count(victim) == 0);
  for (int i = 0; i < kTopics; ++i) {
    if (i == 90) continue;
    INFO("topic " << i);
    CHECK(rows.at(TopicName(i)) == i % 7);
  }
  CheckMatches(db, all, {});

  // A head table missing under a topic that still exists is no
  // destruction: the topic is listed with its error, not hidden.
  db.raw().Query("DROP TABLE " + db.HeadTable(TopicName(5)));
  const auto again = db.client().ListTopicStats();
  REQUIRE(again.size() == kTopics - 1);
  for (const auto& t : again) {
    INFO(t.info.name);
    CHECK(t.error.empty() == (t.info.name != TopicName(5)));
  }
}

TEST_CASE("one broken topic never fails the stats of the others", "[stats]") {
  LiveDb db;
  constexpr int kTopics = 20;
  RegisterMany(db, kTopics);
  // Broken by hand three ways: tables gone, a column gone, and a topic row
  // typed in without any tables or baseline.
  db.raw().Query("DROP TABLE " + db.HeadTable(TopicName(3)));
  db.raw().Query("ALTER TABLE " + db.HeadTable(TopicName(11)) +
                 " DROP COLUMN idle_since");
  db.raw().Query("INSERT INTO " + db.QuotedSchema() +
                 ".topic (name) VALUES ('typed-in')");
  // And one whose tables another build of the baseline created.
  db.raw().Query("UPDATE " + db.QuotedSchema() +
                 ".schema_version SET fingerprint = 'another-build' "
                 "WHERE topic_id = " +
                 std::to_string(db.TopicId(TopicName(17))));
  const auto all = db.client().ListTopicStats();
  REQUIRE(all.size() == kTopics + 1);
  std::map<std::string, std::string> errors;
  for (const auto& t : all) {
    if (!t.error.empty()) errors[t.info.name] = t.error;
  }
  CHECK(errors.size() == 4);
  CHECK_THAT(errors[TopicName(17)], Catch::Contains("recreate"));
  CHECK_THAT(errors[TopicName(3)], Catch::Contains("does not exist"));
  CHECK_THAT(errors[TopicName(11)], Catch::Contains("idle_since"));
  CHECK_THAT(errors["typed-in"], Catch::Contains("does not exist"));
  for (const auto& t : all) {
    if (!t.error.empty()) continue;
    const int i = std::stoi(t.info.name.substr(t.info.name.rfind('-') + 1));
    INFO(t.info.name);
    CHECK(t.stats.headless_rows == i % 7);
  }
}

TEST_CASE("a janitor time planted far in the future reads as the year 2200",
          "[stats]") {
  // The janitor role may write janitor_state's bookkeeping columns; year
  // 9999 in microseconds overflowed the nanosecond system_clock.
  LiveDb db;
  auto topic = db.client().Topic<Counter>("planted");
  topic.Register();
  compaction::Janitor(db.client()).SweepHeadless("planted");
  db.raw().Query("UPDATE " + db.QuotedSchema() +
                 ".janitor_state SET last_success_at = '9999-01-01 00:00+00', "
                 "claimed_until = '9999-01-01 00:00+00', claimed_by = 'x' "
                 "WHERE topic_id = " +
                 std::to_string(db.TopicId("planted")));
  const auto year2200 =
      std::chrono::system_clock::time_point(std::chrono::seconds(7258118400LL));
  for (const auto& stats :
       {topic.Stats().janitor, db.client().ListTopicStats()[0].stats.janitor}) {
    REQUIRE(stats.last_success_at.has_value());
    CHECK(*stats.last_success_at == year2200);
    REQUIRE(stats.claimed_until.has_value());
    CHECK(*stats.claimed_until == year2200);
  }
}

TEST_CASE("consumer lag skips a topic destroyed while it counts", "[stats]") {
  // consumer_lag checks that a topic's message table exists, then counts
  // in it: a Destroy committing in between made the count fail with
  // undefined_table, and every topic's consumers_error with it.
  LiveDb db;
  for (const char* name : {"gone", "kept"}) {
    auto topic = db.client().Topic<Counter>(name);
    topic.Register();
    auto consumer = topic.Consumer("c");
    testing::ConsumeAll(db.client(), consumer);  // positions exist
    topic.RegisterProducer().Produce(Counter{1},
                                     {"k", compaction::CompactionOptions{}});
  }
  RawConn destroyer;
  destroyer.Query("BEGIN");
  destroyer.Query("DELETE FROM " + db.QuotedSchema() +
                  ".topic WHERE id = " + std::to_string(db.TopicId("gone")));
  destroyer.Query("DROP TABLE " + db.HeadTable("gone") + ", " +
                  db.MessageTable("gone"));
  RawConn reader;
  auto lag = std::async(std::launch::async, [&] {
    return reader.Query("SELECT topic, lag_messages FROM " + db.QuotedSchema() +
                        ".consumer_lag(100)");
  });
  const bool waited =
      testing::WaitForLockWait(db.raw(), "consumer_lag(", db.schema());
  destroyer.Query("COMMIT");
  REQUIRE(waited);
  const auto rows = lag.get();
  REQUIRE(rows.size() == 1);
  CHECK(rows[0][0] == "kept");
  CHECK(rows[0][1] == "1");
}
