// Consumers of a database copied from another cluster. Positions and the
// log's xid column hold transaction ids, which only mean something in the
// cluster that handed them out; a logical copy (pg_dump and restore,
// logical replication) carries them into a cluster whose ids may be far
// behind. Read on, a position ahead would count this cluster's new
// messages as consumed, and a copied message ahead would never be read.
// The copy is forged here with the ids it would carry: a position or a
// message some million ids past this server's (test/daemon/copy_test.py
// makes a real one with pg_dump and pg_restore).
#include <catch2/catch.hpp>
#include <string>

#include "consumer_support.hpp"
#include "live_db.hpp"

using compaction::ConsumerOptions;
using compaction::DatabaseError;
using compaction::TopicTail;
using compaction::Tx;
using testing::ConsumeAll;
using testing::Counter;
using testing::Ids;
using testing::LiveDb;
using testing::LogIds;

namespace {

// An xid8 a million past every id this server has handed out.
std::string AheadXid(LiveDb& db) {
  return std::to_string(
      db.raw().Int("SELECT pg_snapshot_xmax(pg_current_snapshot())::text::"
                   "bigint + 1000000"));
}

std::string Position(LiveDb& db, const std::string& consumer) {
  return *db.raw().Value(
      "SELECT string_agg(done_snapshot::text || '/' || "
      "coalesce(read_snapshot::text, '-'), ',') FROM " +
          db.QuotedSchema() + ".consumer_position WHERE consumer = $1",
      {consumer});
}

}  // namespace

TEST_CASE("a consumer position copied from another cluster stops Poll") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>("copied");
  topic.Register();
  auto producer = topic.RegisterProducer();
  producer.Produce(Counter{1});
  auto consumer = topic.Consumer("c");
  REQUIRE(ConsumeAll(db.client(), consumer).size() == 1);
  producer.Produce(Counter{2});  // not consumed yet
  const std::string ahead = AheadXid(db);
  db.raw().Query("UPDATE " + db.QuotedSchema() +
                 ".consumer_position SET done_snapshot = '" + ahead + ":" +
                 ahead + ":' WHERE consumer = 'c'");
  const std::string before = Position(db, "c");
  // Without the check this Poll returned nothing: the second message, its
  // id below the copied position's, looked consumed.
  try {
    db.client().InTransaction([&](Tx& tx) { return consumer.Poll(tx); });
    FAIL("Poll read past a position ahead of the server");
  } catch (const DatabaseError& e) {
    CHECK(e.sqlstate() == compaction::kTransactionIdsAhead);
    CHECK(e.operation() == "Poll");
    const std::string what = e.what();
    CHECK_THAT(what, Catch::Contains("consumer 'c' of topic 'copied', "
                                     "partition 0: its position names "
                                     "transaction id " +
                                     ahead));
    CHECK_THAT(what, Catch::Contains("stop producers"));
    CHECK_THAT(what, Catch::Contains("Moving a database"));
  }
  CHECK(Position(db, "c") == before);
  // A reset takes positions of this cluster again: everything is there.
  CHECK(db.client().ResetConsumer("copied", "c", false) == 1);
  CHECK(Ids(ConsumeAll(db.client(), consumer)) == LogIds(db, "copied"));

  // Copied in the middle of a window: the done snapshot is of this
  // cluster, the window's is not. Checked on that window's next read too,
  // not only when it runs out: a batch of one out of two messages used to
  // be read from it.
  producer.Produce(Counter{3});
  producer.Produce(Counter{4});
  db.raw().Query("UPDATE " + db.QuotedSchema() +
                 ".consumer_position SET read_snapshot = '" + ahead + ":" +
                 ahead + ":' WHERE consumer = 'c'");
  const std::string open = Position(db, "c");
  auto one_at_a_time = topic.Consumer("c", ConsumerOptions{1, false});
  CHECK_THROWS_MATCHES(
      db.client().InTransaction([&](Tx& tx) { return one_at_a_time.Poll(tx); }),
      DatabaseError,
      Catch::Matchers::Predicate<DatabaseError>([](const DatabaseError& e) {
        return e.sqlstate() == compaction::kTransactionIdsAhead;
      }));
  CHECK(Position(db, "c") == open);
}

TEST_CASE("a message copied from another cluster stops Poll and TopicTail") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>("copied_log");
  topic.Register();
  auto producer = topic.RegisterProducer();
  producer.Produce(Counter{1});
  // Copied with the id of its old cluster's writer (pg_restore writes the
  // column as it was).
  db.raw().Query("INSERT INTO " + db.MessageTable("copied_log") +
                 " (schema_version, payload, partition, xid) VALUES (1, "
                 "'{\"value\": 7}', 0, '" +
                 AheadXid(db) + "')");
  // Without the check a new consumer got the first message only, and the
  // copied one would wait until this server's ids passed its own.
  auto consumer = topic.Consumer("fresh");
  try {
    db.client().InTransaction([&](Tx& tx) { return consumer.Poll(tx); });
    FAIL("Poll read a log holding a message ahead of the server");
  } catch (const DatabaseError& e) {
    CHECK(e.sqlstate() == compaction::kTransactionIdsAhead);
    CHECK_THAT(e.what(), Catch::Contains("consumer 'fresh' of topic "
                                         "'copied_log', partition 0: its log "
                                         "holds a message"));
  }
  // The first Poll's positions went with its transaction.
  CHECK(db.raw().Int("SELECT count(*) FROM " + db.QuotedSchema() +
                     ".consumer_position WHERE consumer = 'fresh'") == 0);
  TopicTail tail(db.client(), "copied_log", {.from_start = true});
  try {
    tail.Next();
    FAIL("TopicTail read a log holding a message ahead of the server");
  } catch (const DatabaseError& e) {
    CHECK(e.sqlstate() == compaction::kTransactionIdsAhead);
    CHECK(e.operation() == "TopicTail");
    CHECK_THAT(e.what(), Catch::Contains("the tail of topic 'copied_log'"));
  }
}
