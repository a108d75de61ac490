// Consumers, guarantee 4: the log cleaner keeps tombstones and messages out
// of retention until every active consumer has consumed them; superseded
// versions still go; an inactive consumer holds nothing back.
#include <catch2/catch.hpp>
#include <chrono>

#include "consumer_support.hpp"
#include "live_db.hpp"

using compaction::CompactionOptions;
using compaction::CompactResult;
using compaction::ConsumerOptions;
using compaction::Janitor;
using compaction::ProduceOptions;
using compaction::TopicConfig;
using compaction::Tx;
using testing::Compacted;
using testing::ConsumeAll;
using testing::Counter;
using testing::Ids;
using testing::LiveDb;
using namespace std::chrono_literals;

namespace {

TopicConfig Immediate() {
  TopicConfig config;
  config.retention = 0ms;
  config.tombstone_retention = 0ms;
  return config;
}

bool Exists(LiveDb& db, const std::string& topic, std::int64_t id) {
  return db.raw().Int("SELECT count(*) FROM " + db.MessageTable(topic) +
                          " WHERE id = $1::bigint",
                      {std::to_string(id)}) == 1;
}

struct Log {
  std::int64_t superseded, head, tombstoned_value, tombstone, unkeyed, plain;
};

// Superseded versions first (the cleaner's walk passes them), then what
// a consumer must see: a tombstone head, an unkeyed and a keyed
// uncompacted message.
Log Produce(compaction::Producer<Counter>& producer) {
  Log log;
  log.superseded = producer.Produce(Counter{1}, Compacted("a")).id;
  log.head = producer.Produce(Counter{2}, Compacted("a")).id;
  log.tombstoned_value = producer.Produce(Counter{3}, Compacted("b")).id;
  log.tombstone = producer.ProduceTombstone("b").id;
  log.unkeyed = producer.Produce(Counter{4}).id;
  log.plain =
      producer.Produce(Counter{5}, ProduceOptions{"p", std::nullopt}).id;
  return log;
}

void CompactTwice(Janitor& janitor, const std::string& topic) {
  // Two passes: a pending position turns final in the second.
  janitor.CompactLog(topic);
  janitor.CompactLog(topic);
}

}  // namespace

TEST_CASE("the cleaner waits for an active consumer, not for compaction") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>("held");
  topic.Register(Immediate());
  auto producer = topic.RegisterProducer();
  auto consumer = topic.Consumer("c");
  CHECK(ConsumeAll(db.client(), consumer).empty());  // positions exist
  const Log log = Produce(producer);
  Janitor janitor(db.client());
  CompactTwice(janitor, "held");
  // Compaction goes on: superseded versions are gone.
  CHECK_FALSE(Exists(db, "held", log.superseded));
  CHECK_FALSE(Exists(db, "held", log.tombstoned_value));
  // What the consumer has not read yet stays, the tombstone included.
  CHECK(Exists(db, "held", log.tombstone));
  CHECK(Exists(db, "held", log.unkeyed));
  CHECK(Exists(db, "held", log.plain));
  CHECK(Exists(db, "held", log.head));

  auto got = ConsumeAll(db.client(), consumer);
  CHECK(Ids(got) == std::vector<std::int64_t>{log.head, log.tombstone,
                                              log.unkeyed, log.plain});
  // The tombstone came as a head without a value.
  CHECK(got[1].head);
  CHECK_FALSE(got[1].message.has_value());
  CompactTwice(janitor, "held");
  CHECK_FALSE(Exists(db, "held", log.tombstone));
  CHECK_FALSE(Exists(db, "held", log.unkeyed));
  CHECK_FALSE(Exists(db, "held", log.plain));
  CHECK(Exists(db, "held", log.head));
}

TEST_CASE("a Poll that is not committed holds the cleaner back") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>("uncommitted");
  topic.Register(Immediate());
  auto producer = topic.RegisterProducer();
  auto consumer = topic.Consumer("c");
  CHECK(ConsumeAll(db.client(), consumer).empty());
  const auto unkeyed = producer.Produce(Counter{1});
  Tx tx = db.client().Begin();
  CHECK(Ids(consumer.Poll(tx)) == std::vector<std::int64_t>{unkeyed.id});
  Janitor janitor(db.client());
  CompactTwice(janitor, "uncommitted");
  CHECK(Exists(db, "uncommitted", unkeyed.id));
  tx.Rollback();  // so it is delivered again
  CHECK(Ids(ConsumeAll(db.client(), consumer)) ==
        std::vector<std::int64_t>{unkeyed.id});
}

TEST_CASE("an inactive consumer holds nothing back") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>("inactive");
  TopicConfig config = Immediate();
  config.consumer_inactive_after = 1h;
  topic.Register(config);
  auto producer = topic.RegisterProducer();
  auto consumer = topic.Consumer("c");
  CHECK(ConsumeAll(db.client(), consumer).empty());
  const Log log = Produce(producer);
  // Its last Poll, two hours ago.
  db.raw().Query("UPDATE " + db.QuotedSchema() +
                 ".consumer_position SET last_poll_at = now() - interval "
                 "'2 hours'");
  Janitor janitor(db.client());
  CompactTwice(janitor, "inactive");
  CHECK_FALSE(Exists(db, "inactive", log.tombstone));
  CHECK_FALSE(Exists(db, "inactive", log.unkeyed));
  CHECK_FALSE(Exists(db, "inactive", log.plain));
  CHECK(Exists(db, "inactive", log.head));
  // Back again, it reads what is left: the heads.
  CHECK(Ids(ConsumeAll(db.client(), consumer)) ==
        std::vector<std::int64_t>{log.head});
}

// An expiring tombstone takes along its key's older messages the message
// walk has passed (cleaner_test.cpp), but not an uncompacted one that an
// active consumer has still to read. Such a message can sit below a
// tombstone the consumer has read: it drew its id first and committed
// after the consumer's Poll, and the message walk passed its id while its
// transaction was still open.
TEST_CASE("an expiring tombstone leaves an unread uncompacted message") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>("late");
  topic.Register(Immediate());
  auto producer = topic.RegisterProducer();
  auto consumer = topic.Consumer("c");
  CHECK(ConsumeAll(db.client(), consumer).empty());
  Janitor janitor(db.client());

  Tx late = db.client().Begin();
  const auto plain =
      producer.ProduceInTx(late, Counter{1}, ProduceOptions{"k", std::nullopt});
  const auto tombstone = producer.ProduceTombstone("k");
  REQUIRE(plain.id < tombstone.id);
  // The consumer has not read the tombstone: it stays. The message walk
  // passes the id of the message still in flight.
  janitor.CompactLog("late");
  REQUIRE(Exists(db, "late", tombstone.id));
  REQUIRE(db.raw().Int("SELECT walked_position FROM " + db.QuotedSchema() +
                       ".log_cleaner_state") >= tombstone.id);

  // The consumer reads the tombstone; then the late message commits.
  CHECK(Ids(ConsumeAll(db.client(), consumer)) ==
        std::vector<std::int64_t>{tombstone.id});
  late.Commit();
  REQUIRE(Exists(db, "late", plain.id));

  // The tombstone expires; the message it would have taken along stays,
  // and is delivered.
  CompactTwice(janitor, "late");
  CHECK_FALSE(Exists(db, "late", tombstone.id));
  CHECK(Exists(db, "late", plain.id));
  CHECK(Ids(ConsumeAll(db.client(), consumer)) ==
        std::vector<std::int64_t>{plain.id});
  // Read, it goes.
  CompactTwice(janitor, "late");
  CHECK_FALSE(Exists(db, "late", plain.id));
}

// An app login could otherwise plant a consumer that holds the cleaner back
// for good and is never reported inactive (last_poll_at infinity), or make
// the cleaner stop waiting for one at once (-infinity).
TEST_CASE("a consumer position's timestamps are the server's clock") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>("clock");
  topic.Register(Immediate());
  auto consumer = topic.Consumer("c");
  CHECK(ConsumeAll(db.client(), consumer).empty());  // its position exists
  const std::string table = db.QuotedSchema() + ".consumer_position";
  const std::string id = std::to_string(db.TopicId("clock"));
  for (const char* when :
       {"'infinity'", "'-infinity'", "now() + interval '1 day'"}) {
    INFO(when);
    CHECK(db.raw().TryExec("INSERT INTO " + table +
                           " (topic_id, consumer, partition, done_snapshot, "
                           "last_poll_at) VALUES (" +
                           id + ", 'ghost', 0, '1:1:', " + when + ")") ==
          "23514");
    CHECK(db.raw().TryExec("INSERT INTO " + table +
                           " (topic_id, consumer, partition, done_snapshot, "
                           "created_at) VALUES (" +
                           id + ", 'ghost', 0, '1:1:', " + when + ")") ==
          "23514");
    CHECK(db.raw().TryExec("UPDATE " + table + " SET last_poll_at = " + when) ==
          "23514");
    CHECK(db.raw().TryExec("UPDATE " + table + " SET created_at = " + when) ==
          "23514");
  }
  // A time in the past is a consumer that has not polled since.
  CHECK(db.raw()
            .TryExec("UPDATE " + table +
                     " SET last_poll_at = now() - "
                     "interval '2 hours'")
            .empty());
  CHECK(ConsumeAll(db.client(), consumer).empty());  // Poll still moves it
}
