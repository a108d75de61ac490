// Consumers, guarantees 1 (complete, once) and 2 (late commits), against a
// live database. Orderings are forced with transaction control: a writer's
// transaction is held open while others commit past it.
#include <libpq-fe.h>

#include <algorithm>
#include <catch2/catch.hpp>

#include "consumer_support.hpp"
#include "live_db.hpp"

using compaction::ConsumerOptions;
using compaction::ProduceOptions;
using compaction::RawMessage;
using compaction::Tx;
using testing::Compacted;
using testing::ConsumeAll;
using testing::Counter;
using testing::Ids;
using testing::LiveDb;
using testing::LogIds;
using testing::NaiveRead;

TEST_CASE("a consumer reads every committed message once, in small batches") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>("all");
  topic.Register();
  auto producer = topic.RegisterProducer();
  for (int i = 0; i < 20; ++i) {
    if (i % 3 == 0) {
      producer.Produce(Counter{i});  // unkeyed
    } else if (i % 3 == 1) {
      producer.Produce(Counter{i}, ProduceOptions{"k" + std::to_string(i % 4),
                                                  std::nullopt});
    } else {
      producer.Produce(Counter{i}, Compacted("c" + std::to_string(i % 5)));
    }
  }
  // A rolled-back produce is never delivered.
  {
    Tx tx = db.client().Begin();
    producer.ProduceInTx(tx, Counter{-1});
    tx.Rollback();
  }
  auto consumer = topic.Consumer("reader", ConsumerOptions{3, false});
  auto got = ConsumeAll(db.client(), consumer);
  CHECK(Ids(got) == LogIds(db, "all"));
  for (const auto& d : got) {
    REQUIRE(d.message.has_value());
    CHECK(d.message->value != -1);
  }
  // Consumed: nothing again, also for a second object of the same consumer.
  auto again = topic.Consumer("reader");
  CHECK(ConsumeAll(db.client(), again).empty());
  // Another consumer starts at the start.
  auto other = topic.Consumer("other", ConsumerOptions{500, false});
  CHECK(Ids(ConsumeAll(db.client(), other)) == LogIds(db, "all"));
  // New messages come next, once.
  const auto next = producer.Produce(Counter{100});
  auto tail = ConsumeAll(db.client(), consumer);
  REQUIRE(tail.size() == 1);
  CHECK(tail[0].id == next.id);
}

TEST_CASE("a rolled-back Poll delivers the same messages again") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>("rollback");
  topic.Register();
  auto producer = topic.RegisterProducer();
  for (int i = 0; i < 5; ++i) producer.Produce(Counter{i});
  auto consumer = topic.Consumer("c", ConsumerOptions{2, false});
  std::vector<std::int64_t> first;
  {
    Tx tx = db.client().Begin();
    first = Ids(consumer.Poll(tx));
    tx.Rollback();
  }
  REQUIRE(first.size() == 2);
  auto got = ConsumeAll(db.client(), consumer);
  const auto ids = Ids(got);
  CHECK(ids == LogIds(db, "rollback"));
  CHECK(std::vector<std::int64_t>(ids.begin(), ids.begin() + 2) == first);
}

TEST_CASE("a message committed after later ids were consumed is delivered") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>("late");
  topic.Register();
  auto producer = topic.RegisterProducer();
  auto consumer = topic.Consumer("c");
  std::int64_t naive_last = 0;

  // A takes its id and stays open; B takes a later id and commits.
  Tx a = db.client().Begin();
  const auto late = producer.ProduceInTx(a, Counter{8});
  const auto early = producer.Produce(Counter{9});
  REQUIRE(late.id < early.id);

  auto first = ConsumeAll(db.client(), consumer);
  CHECK(Ids(first) == std::vector<std::int64_t>{early.id});
  CHECK(NaiveRead(db, "late", naive_last) ==
        std::vector<std::int64_t>{early.id});

  a.Commit();
  auto second = ConsumeAll(db.client(), consumer);
  CHECK(Ids(second) == std::vector<std::int64_t>{late.id});
  // The naive follower ("id > last id") loses it for good.
  CHECK(NaiveRead(db, "late", naive_last).empty());
  CHECK(ConsumeAll(db.client(), consumer).empty());
}

TEST_CASE("a late commit is delivered in the middle of a window walk") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>("window");
  topic.Register();
  auto producer = topic.RegisterProducer();
  auto consumer = topic.Consumer("c", ConsumerOptions{2, false});
  Tx a = db.client().Begin();
  const auto late = producer.ProduceInTx(a, Counter{0});
  for (int i = 1; i <= 5; ++i) producer.Produce(Counter{i});
  // One batch of the window, then the late writer commits.
  auto first =
      db.client().InTransaction([&](Tx& tx) { return consumer.Poll(tx); });
  REQUIRE(first.size() == 2);
  a.Commit();
  auto rest = ConsumeAll(db.client(), consumer);
  std::vector<std::int64_t> all = Ids(first);
  for (auto id : Ids(rest)) all.push_back(id);
  std::sort(all.begin(), all.end());
  CHECK(all == LogIds(db, "window"));
  CHECK(Ids(rest).back() == late.id);  // it came with the next window
}

TEST_CASE("a long transaction does not hold back or repeat deliveries") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>("long");
  topic.Register();
  auto producer = topic.RegisterProducer();
  auto consumer = topic.Consumer("c", ConsumerOptions{4, false});
  // An open transaction with an xid (it wrote to the log) keeps every
  // snapshot's xmin behind it.
  Tx holder = db.client().Begin();
  const auto held = producer.ProduceInTx(holder, Counter{-1});
  std::vector<std::int64_t> seen;
  for (int round = 0; round < 5; ++round) {
    std::vector<std::int64_t> produced;
    for (int i = 0; i < 3; ++i) {
      produced.push_back(producer.Produce(Counter{round * 10 + i}).id);
    }
    CHECK(Ids(ConsumeAll(db.client(), consumer)) == produced);
  }
  holder.Commit();
  CHECK(Ids(ConsumeAll(db.client(), consumer)) ==
        std::vector<std::int64_t>{held.id});
}

TEST_CASE("a consumer's own produce in its Poll transaction commits with it") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>("own");
  topic.Register();
  auto producer = topic.RegisterProducer();
  producer.Produce(Counter{1});
  auto consumer = topic.Consumer("c");
  // Produce, then Poll, in one transaction, rolled back: neither happened.
  {
    Tx tx = db.client().Begin();
    producer.ProduceInTx(tx, Counter{2});
    CHECK_FALSE(consumer.Poll(tx).empty());
    tx.Rollback();
  }
  auto got = ConsumeAll(db.client(), consumer);
  CHECK(Ids(got) == LogIds(db, "own"));
  REQUIRE(got.size() == 1);
  // Committed together: whatever that Poll delivered is consumed, and
  // nothing is delivered twice or lost.
  auto with_own = db.client().InTransaction([&](Tx& tx) {
    producer.ProduceInTx(tx, Counter{3});
    return consumer.Poll(tx);
  });
  producer.Produce(Counter{4});
  auto rest = ConsumeAll(db.client(), consumer);
  std::vector<std::int64_t> all = Ids(got);
  for (auto& d : with_own) all.push_back(d.id);
  for (auto& d : rest) all.push_back(d.id);
  std::sort(all.begin(), all.end());
  CHECK(all == LogIds(db, "own"));
}

// PostgreSQL leaves a transaction's own id out of the in-progress list of
// its snapshots: a window taken by a Poll whose transaction has an id (its
// position lock gives it one) counts that transaction as ended once any
// later id has ended. Stored as the consumed snapshot, it would make what
// the transaction produces after the Poll look consumed already.
TEST_CASE("a consumer's own produce after its Poll is delivered once") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>("own_after");
  topic.Register();
  auto producer = topic.RegisterProducer();
  auto consumer = topic.Consumer("c");
  CHECK(ConsumeAll(db.client(), consumer).empty());
  Tx tx = db.client().Begin();
  CHECK(consumer.Poll(tx).empty());
  PGresult* assigned =
      PQexec(tx.native_handle(), "SELECT pg_current_xact_id_if_assigned()");
  REQUIRE(PQresultStatus(assigned) == PGRES_TUPLES_OK);
  const bool has_id = !PQgetisnull(assigned, 0, 0);
  PQclear(assigned);
  REQUIRE(has_id);
  // A later id ends before the next window is taken.
  const auto other = producer.Produce(Counter{1});
  CHECK(Ids(consumer.Poll(tx)) == std::vector<std::int64_t>{other.id});
  const auto own = producer.ProduceInTx(tx, Counter{2});
  tx.Commit();
  CHECK(Ids(ConsumeAll(db.client(), consumer)) ==
        std::vector<std::int64_t>{own.id});
  // Produced before the Poll too: the Poll's window leaves it for after
  // the commit, delivered once with the rest.
  Tx second = db.client().Begin();
  const auto before = producer.ProduceInTx(second, Counter{3});
  const auto later = producer.Produce(Counter{4});
  CHECK(Ids(consumer.Poll(second)) == std::vector<std::int64_t>{later.id});
  const auto after = producer.ProduceInTx(second, Counter{5});
  second.Commit();
  CHECK(Ids(ConsumeAll(db.client(), consumer)) ==
        std::vector<std::int64_t>{before.id, after.id});
}

TEST_CASE("a consumer follows its topic through Destroy and Register") {
  LiveDb db;
  // Destroyed and re-created through another client: the consumer's client
  // still caches the first topic (its id, one partition) when it polls.
  compaction::Client admin = db.NewClient(1);
  admin.Topic<Counter>("again").Register();
  auto topic = db.client().Topic<Counter>("again");
  topic.RegisterProducer().Produce(Counter{1});
  auto consumer = topic.Consumer("c");
  REQUIRE(ConsumeAll(db.client(), consumer).size() == 1);
  admin.Topic<Counter>("again").Destroy();
  {
    Tx tx = db.client().Begin();
    CHECK_THROWS_AS(consumer.Poll(tx), compaction::TopicNotFound);
    // The look-up failed, not a statement: the transaction is usable.
    CHECK_THROWS_AS(consumer.Poll(tx), compaction::TopicNotFound);
    tx.Commit();
  }
  // From the second round on, the client's cache holds the topic of the
  // round before, whose id is gone.
  for (const int partitions : {1, 1, 4, 1}) {
    INFO(partitions << " partitions");
    compaction::TopicConfig config;
    config.partitions = partitions;
    admin.Topic<Counter>("again").Register(config);
    admin.Topic<Counter>("again").RegisterProducer().Produce(Counter{2});
    // A new consumer of the new topic: it starts at the start of the log.
    auto got = ConsumeAll(db.client(), consumer);
    REQUIRE(got.size() == 1);
    CHECK(got[0].message->value == 2);
    admin.Topic<Counter>("again").Destroy();
  }
}
