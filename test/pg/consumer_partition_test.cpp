// Consumers, guarantees 5 (partitions shared by instances through SKIP
// LOCKED) and 8 (typed errors, names), and the topic settings they add.
#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <future>
#include <set>

#include "citus_profile.hpp"
#include "consumer_support.hpp"
#include "live_db.hpp"

using compaction::ConsumerOptions;
using compaction::InvalidArgument;
using compaction::MessageDecodeError;
using compaction::MessageSchemaVersionMismatch;
using compaction::ProduceOptions;
using compaction::RawMessage;
using compaction::TopicConfig;
using compaction::Tx;
using testing::Compacted;
using testing::ConsumeAll;
using testing::Counter;
using testing::Ids;
using testing::LiveDb;
using testing::LogIds;
using namespace std::chrono_literals;

namespace {

TopicConfig Partitions(int n) {
  TopicConfig config;
  config.partitions = n;
  return config;
}

// The partitions the given messages landed in.
std::set<int> PartitionsOf(LiveDb& db, const std::string& topic,
                           const std::vector<std::int64_t>& ids) {
  std::set<int> out;
  for (auto id : ids) {
    out.insert(static_cast<int>(db.raw().Int("SELECT partition FROM " +
                                                 db.MessageTable(topic) +
                                                 " WHERE id = $1::bigint",
                                             {std::to_string(id)})));
  }
  return out;
}

// A Poll on another thread that must not wait for the other instance's
// lock (SKIP LOCKED): fails the test when it takes 10 s.
template <class M>
std::vector<compaction::Delivery<M>> PollBeside(compaction::Consumer<M>& c,
                                                Tx& tx) {
  auto f = std::async(std::launch::async, [&] { return c.Poll(tx); });
  REQUIRE(f.wait_for(10s) == std::future_status::ready);
  return f.get();
}

}  // namespace

TEST_CASE("partitions are set at creation and fixed afterwards") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>("parts");
  CHECK(topic.Register().partitions == 1);
  CHECK_THROWS_AS(topic.Register(Partitions(4)), InvalidArgument);
  auto four = db.client().Topic<Counter>("four");
  CHECK(four.Register(Partitions(4)).partitions == 4);
  CHECK(four.Register().partitions == 4);
  CHECK(four.Register(Partitions(4)).partitions == 4);
  CHECK_THROWS_AS(four.Register(Partitions(2)), InvalidArgument);
  CHECK_THROWS_AS(db.client().Topic<Counter>("zero").Register(Partitions(0)),
                  InvalidArgument);
  CHECK_THROWS_AS(db.client().Topic<Counter>("many").Register(Partitions(1025)),
                  InvalidArgument);
  CHECK(db.raw().Int("SELECT count(*) FROM " + db.QuotedSchema() +
                     ".topic WHERE name IN ('zero', 'many')") == 0);
  TopicConfig inactive;
  inactive.consumer_inactive_after = 0ms;
  CHECK_THROWS_AS(four.Register(inactive), InvalidArgument);
  inactive.consumer_inactive_after = 90s;
  CHECK(four.Register(inactive).consumer_inactive_after == 90s);
  CHECK(four.Register().consumer_inactive_after == 90s);
  CHECK(four.Info().partitions == 4);
  // Refused whole: the other settings asked for with the wrong partitions
  // are not applied either (they were, before the refusal).
  TopicConfig both = Partitions(8);
  both.retention = std::chrono::hours(1);
  both.consumer_inactive_after = 30s;
  CHECK_THROWS_WITH(four.Register(both),
                    Catch::Contains("fixed at its creation (8 requested)"));
  CHECK(four.Info().retention != std::chrono::hours(1));
  CHECK(four.Info().consumer_inactive_after == 90s);
}

TEST_CASE("a key's messages share a partition, unkeyed ones spread") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>("spread");
  topic.Register(Partitions(4));
  auto producer = topic.RegisterProducer();
  for (int round = 0; round < 3; ++round) {
    for (int k = 0; k < 20; ++k) {
      producer.Produce(Counter{k}, Compacted("k" + std::to_string(k)));
    }
    producer.Produce(Counter{round}, ProduceOptions{"plain", std::nullopt});
  }
  for (int i = 0; i < 8; ++i) producer.Produce(Counter{i});
  const std::string table = db.MessageTable("spread");
  CHECK(db.raw().Int("SELECT count(*) FROM (SELECT message_key FROM " + table +
                     " WHERE message_key IS NOT NULL GROUP BY message_key "
                     "HAVING count(DISTINCT partition) > 1) k") == 0);
  CHECK(db.raw().Int("SELECT count(DISTINCT partition) FROM " + table +
                     " WHERE message_key IS NULL") == 4);
  CHECK(db.raw().Int("SELECT count(DISTINCT partition) FROM " + table +
                     " WHERE message_key IS NOT NULL") > 1);
}

TEST_CASE("instances of a consumer work different partitions at once") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>("share");
  topic.Register(Partitions(4));
  auto producer = topic.RegisterProducer();
  auto one = topic.Consumer("c", ConsumerOptions{100, false});
  auto two = topic.Consumer("c", ConsumerOptions{100, false});
  // The first Poll creates the positions (another instance's first Poll
  // would wait for it to commit).
  CHECK(ConsumeAll(db.client(), one).empty());
  for (int i = 0; i < 40; ++i) producer.Produce(Counter{i});
  std::vector<std::int64_t> all;
  Tx a = db.client().Begin();
  auto got_a = one.Poll(a);  // holds one partition
  REQUIRE_FALSE(got_a.empty());
  Tx b = db.client().Begin();
  auto got_b = PollBeside(two, b);
  REQUIRE_FALSE(got_b.empty());
  const auto pa = PartitionsOf(db, "share", Ids(got_a));
  const auto pb = PartitionsOf(db, "share", Ids(got_b));
  CHECK(pa.size() == 1);
  CHECK(pb.size() == 1);
  CHECK(pa != pb);
  a.Commit();
  b.Commit();
  for (auto id : Ids(got_a)) all.push_back(id);
  for (auto id : Ids(got_b)) all.push_back(id);
  // Alternating instances drain the rest; nothing twice, nothing lost.
  for (int i = 0; i < 20; ++i) {
    auto& c = i % 2 ? one : two;
    auto batch = db.client().InTransaction([&](Tx& tx) { return c.Poll(tx); });
    for (auto id : Ids(batch)) all.push_back(id);
  }
  std::sort(all.begin(), all.end());
  CHECK(all == LogIds(db, "share"));
}

TEST_CASE(
    "a topic destroyed between a Poll's look-up and its lock is "
    "TopicNotFound") {
  // With more partitions the look-up and the lock are two statements, and
  // the lock reads the message table. The ordering is forced: a
  // transaction holds that table while the Poll's lock waits for it, then
  // drops the topic as Destroy does.
  LiveDb db;
  if (testing::SkipOnCitus("the lock reads no message table on Citus")) {
    return;
  }
  auto topic = db.client().Topic<Counter>("going");
  topic.Register(Partitions(3));
  auto consumer = topic.Consumer("c", ConsumerOptions{100, false});
  CHECK(ConsumeAll(db.client(), consumer).empty());  // creates the positions
  const std::string head = db.HeadTable("going");
  const std::string message = db.MessageTable("going");
  testing::RawConn dropper;
  dropper.Query("BEGIN");
  dropper.Query("LOCK TABLE " + message + " IN ACCESS EXCLUSIVE MODE");
  auto polled = std::async(std::launch::async, [&] {
    db.client().InTransaction([&](Tx& tx) { consumer.Poll(tx); });
  });
  testing::RawConn observer;
  CHECK(
      testing::WaitForLockWait(observer, "compaction:Poll:lock", db.schema()));
  dropper.Query("DELETE FROM " + db.QuotedSchema() +
                ".topic WHERE name = 'going'");
  dropper.Query("DROP TABLE " + head + ", " + message);
  dropper.Query("COMMIT");
  CHECK_THROWS_AS(polled.get(), compaction::TopicNotFound);
}

TEST_CASE("with one partition, instances take turns and deliver once") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>("turns");
  topic.Register();
  auto producer = topic.RegisterProducer();
  auto one = topic.Consumer("c", ConsumerOptions{4, false});
  auto two = topic.Consumer("c", ConsumerOptions{4, false});
  CHECK(ConsumeAll(db.client(), one).empty());  // creates the position
  for (int i = 0; i < 6; ++i) producer.Produce(Counter{i});
  Tx a = db.client().Begin();
  auto first = one.Poll(a);
  CHECK(first.size() == 4);
  // The partition is held: the other instance gets nothing, at once.
  Tx b = db.client().Begin();
  CHECK(PollBeside(two, b).empty());
  b.Rollback();
  a.Commit();
  auto rest = ConsumeAll(db.client(), two);
  std::vector<std::int64_t> all = Ids(first);
  for (auto id : Ids(rest)) all.push_back(id);
  CHECK(all == LogIds(db, "turns"));
}

TEST_CASE("a delivery a typed consumer cannot decode is a typed error") {
  LiveDb db;
  auto raw_topic = db.client().Topic<RawMessage>("typed");
  raw_topic.Register();
  auto raw = raw_topic.RegisterProducer();
  auto typed_topic = db.client().Topic<Counter>("typed");
  auto typed = typed_topic.RegisterProducer();
  typed.Produce(Counter{1});
  const auto other_version = raw.Produce(RawMessage{2, {{"value", 2}}});
  typed.Produce(Counter{3});
  const auto bad_json = raw.Produce(RawMessage{1, {{"other", true}}});
  auto consumer = typed_topic.Consumer("c", ConsumerOptions{1, false});
  auto polled = [&] {
    return db.client().InTransaction([&](Tx& tx) { return consumer.Poll(tx); });
  };
  CHECK(polled().size() == 1);
  for (int attempt = 0; attempt < 2; ++attempt) {  // never skipped
    try {
      polled();
      FAIL("no error");
    } catch (const MessageSchemaVersionMismatch& e) {
      CHECK(e.message_id() == other_version.id);
      CHECK(e.stored_version() == 2);
      CHECK(std::string(e.what()).find(std::to_string(other_version.id)) !=
            std::string::npos);
    }
  }
  // A RawMessage consumer of the same name reads everything, from there.
  auto raw_consumer = raw_topic.Consumer("c", ConsumerOptions{1, false});
  auto rest = ConsumeAll(db.client(), raw_consumer);
  REQUIRE(rest.size() == 3);
  CHECK(rest[0].id == other_version.id);
  CHECK(rest[0].message->schema_version == 2);
  CHECK(rest[2].id == bad_json.id);
  // The typed one meets the bad payload the same way.
  auto fresh = typed_topic.Consumer("fresh", ConsumerOptions{10, false});
  try {
    ConsumeAll(db.client(), fresh);
    FAIL("no error");
  } catch (const MessageDecodeError& e) {
    CHECK(e.message_id() == other_version.id);
  }
}

TEST_CASE("consumer names and options are checked before any I/O") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>("names");
  CHECK_THROWS_AS(topic.Consumer(""), InvalidArgument);
  CHECK_THROWS_AS(topic.Consumer("Upper"), InvalidArgument);
  CHECK_THROWS_AS(topic.Consumer("a b"), InvalidArgument);
  CHECK_THROWS_AS(topic.Consumer(std::string(101, 'a')), InvalidArgument);
  CHECK_THROWS_AS(topic.Consumer("ok", ConsumerOptions{0, false}),
                  InvalidArgument);
  CHECK_THROWS_AS(topic.Consumer("ok", ConsumerOptions{10001, false}),
                  InvalidArgument);
  CHECK_NOTHROW(topic.Consumer("ok.name_1-x", ConsumerOptions{10000, true}));
  // The topic is not registered: Poll says so, and the transaction lives.
  auto consumer = topic.Consumer("ok");
  Tx tx = db.client().Begin();
  CHECK_THROWS_AS(consumer.Poll(tx), compaction::TopicNotFound);
  tx.Rollback();
}
