// Consumers, guarantee 6 (bounded cost): a Poll reads in proportion to its
// batch, not to the log. Counted in the index blocks the Poll's own
// transaction touched (pg_stat_get_xact_blocks_fetched), not in time; and
// a Poll transaction's round trips, traced by libpq.
#include <catch2/catch.hpp>
#include <chrono>
#include <compaction/tail.hpp>
#include <future>
#include <thread>

#include "consumer_support.hpp"
#include "live_db.hpp"
#include "round_trips.hpp"

using compaction::ConsumerOptions;
using compaction::Tx;
using testing::ConsumeAll;
using testing::Counter;
using testing::LiveDb;
using testing::RawConn;
using testing::RoundTrips;
using namespace std::chrono_literals;

namespace {

// Index blocks of `index` a Poll of `consumer` touches, and its deliveries.
std::pair<std::int64_t, std::size_t> PollBlocks(
    compaction::Consumer<Counter>& consumer, const std::string& index) {
  RawConn own;
  own.Query("BEGIN");
  Tx tx = Tx::Borrow(own.get());
  const std::size_t got = consumer.Poll(tx).size();
  const std::int64_t blocks =
      own.Int("SELECT pg_stat_get_xact_blocks_fetched($1::regclass)", {index});
  own.Query("COMMIT");
  return {blocks, got};
}

}  // namespace

TEST_CASE("a Poll in the tail of a large log reads a few index pages") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>("tail");
  topic.Register();
  const std::string message = db.MessageTable("tail");
  const std::string index = message + "_consume";
  // 100,000 messages in 100 transactions: about 400 leaf pages of the
  // consumers' index.
  for (int i = 0; i < 100; ++i) {
    db.raw().Query("INSERT INTO " + message +
                   " (message_key, schema_version, payload) SELECT 'k' || g, "
                   "1, '{\"value\": 1}' FROM generate_series(1, 1000) g");
  }
  db.raw().Query("VACUUM ANALYZE " + message);
  auto consumer = topic.Consumer("c", ConsumerOptions{10000, false});
  REQUIRE(ConsumeAll(db.client(), consumer).size() == 100000);
  topic.RegisterProducer().Produce(Counter{7});
  // The window after the log: the index scan starts at the last window's
  // xmax, not at the partition's first entry.
  const auto [blocks, got] = PollBlocks(consumer, index);
  CHECK(got == 1);
  INFO("index blocks touched: " << blocks);
  CHECK(blocks < 20);
}

TEST_CASE("an idle Wait looks at every partition only now and then") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>("many");
  compaction::TopicConfig config;
  config.partitions = 64;
  topic.Register(config);
  const std::string message = db.MessageTable("many");
  auto producer = topic.RegisterProducer();
  auto consumer = topic.Consumer("c");
  // A writer in progress while the consumer catches up past a later one.
  Tx late = db.client().Begin();
  producer.ProduceInTx(late, Counter{1});
  producer.Produce(Counter{2});
  REQUIRE(ConsumeAll(db.client(), consumer).size() == 1);
  auto waiter =
      std::async(std::launch::async, [&] { return consumer.Wait(30s); });
  // What the waiter's connection ran last, sampled for about a second: the
  // probe of the log's newest id and writers, or the one of every position.
  int quick = 0, full = 0;
  for (int i = 0; i < 100; ++i) {
    const auto rows = db.raw().Query(
        "SELECT query LIKE '/* compaction:Wait:log */%' FROM "
        "pg_catalog.pg_stat_activity WHERE query LIKE '/* compaction:Wait%' "
        "AND strpos(query, $1) > 0",
        {message});
    for (const auto& row : rows) ++(*row[0] == "t" ? quick : full);
    std::this_thread::sleep_for(10ms);
  }
  INFO("quick " << quick << ", full " << full);
  CHECK(quick > full);
  // The writer's end is news: its message has an id below the newest.
  CHECK(waiter.wait_for(0s) == std::future_status::timeout);
  late.Commit();
  CHECK(waiter.get());
  CHECK(ConsumeAll(db.client(), consumer).size() == 1);
}

// Counted in an owned transaction: BEGIN rides with the first statement,
// COMMIT is one round trip.
TEST_CASE("a Poll transaction's round trips") {
  // With one partition the topic's look-up and the position lock share one
  // round trip (the lock statement names no message table).
  for (const int partitions : {1, 4}) {
    INFO(partitions << " partitions");
    LiveDb db;
    auto topic = db.client().Topic<Counter>("trips");
    compaction::TopicConfig config;
    config.partitions = partitions;
    topic.Register(config);
    auto producer = topic.RegisterProducer();
    for (int i = 0; i < 8; ++i) producer.Produce(Counter{i});
    // One connection, its statements prepared by a first Poll.
    compaction::Client client = db.NewClient(1);
    auto consumer =
        client.Topic<Counter>("trips").Consumer("c", ConsumerOptions{1, false});
    PGconn* conn = nullptr;
    client.InTransaction([&](Tx& tx) {
      conn = tx.native_handle();
      consumer.Poll(tx);
    });
    // A batch that fills in the window it opens, and one with nothing new.
    const int batch = RoundTrips(conn, [&] {
      client.InTransaction(
          [&](Tx& tx) { CHECK(consumer.Poll(tx).size() == 1); });
    });
    std::size_t rest = 0;
    for (int i = 0; i < 20; ++i) {
      client.InTransaction([&](Tx& tx) { rest += consumer.Poll(tx).size(); });
    }
    REQUIRE(rest == 6);
    const int idle = RoundTrips(conn, [&] {
      client.InTransaction([&](Tx& tx) { CHECK(consumer.Poll(tx).empty()); });
    });
    // BEGIN + look-up (+ lock), lock, read, advance, COMMIT.
    const int expected = partitions == 1 ? 4 : 5;
    CHECK(batch == expected);
    CHECK(idle == expected);
  }
}

TEST_CASE("an idle TopicTail asks every partition in one round trip") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>("tailed");
  compaction::TopicConfig config;
  config.partitions = 8;
  topic.Register(config);
  compaction::Client client = db.NewClient(1);
  PGconn* conn = nullptr;
  client.InTransaction([&](Tx& tx) { conn = tx.native_handle(); });
  compaction::TopicTail tail(client, "tailed");
  auto producer = topic.RegisterProducer();
  // Starts now; its statements prepared by a first read and question.
  CHECK(tail.Next().empty());
  producer.Produce(Counter{0});
  CHECK(tail.Next().size() == 1);
  CHECK(tail.Next().empty());
  int idle = 0;
  CHECK(RoundTrips(conn,
                   [&] { idle = static_cast<int>(tail.Next().size()); }) == 1);
  CHECK(idle == 0);
  // News in one partition: the question, then that partition's read.
  producer.Produce(Counter{1});
  std::size_t got = 0;
  CHECK(RoundTrips(conn, [&] { got = tail.Next().size(); }) == 2);
  CHECK(got == 1);
  CHECK(tail.Next().empty());
}
