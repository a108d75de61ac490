// The semantics (doc/architecture.md) that a caller's environment could
// bend: the isolation level, stale producers, broken connections, the
// winner rule's schema versions, and the lock loop's bound.
#include <catch2/catch.hpp>
#include <future>
#include <thread>
#include <vector>

#include "citus_profile.hpp"
#include "live_db.hpp"

using namespace compaction;
using namespace testing;
using namespace std::chrono_literals;

TEST_CASE("a serializable default isolation does not reach the lock loop") {
  LiveDb db;
  // Some shops set this for the role or the whole server.
  ClientOptions options;
  options.schema = db.schema();
  options.pool_size = 8;
  Client client = Client::Connect(
      "options='-c default_transaction_isolation=serializable'", options);
  auto topic = client.Topic<Counter>("serial");
  topic.Register();
  auto producer = topic.RegisterProducer();
  const auto key = topic.Key("absent");
  std::vector<std::thread> threads;
  std::atomic<int> errors{0};
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 10; ++i) {
        try {
          Increment(client, key, producer);
        } catch (const Error&) {
          ++errors;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  CHECK(errors == 0);
  CHECK(key.CompactionHead()->message.value == 80);
  client.InTransaction([&](Tx& tx) {
    PGresult* r = PQexec(tx.native_handle(), "SHOW transaction_isolation");
    CHECK(std::string(PQgetvalue(r, 0, 0)) == "read committed");
    PQclear(r);
  });
}

TEST_CASE(
    "a borrowed transaction that is not READ COMMITTED is refused before any "
    "write") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>("rr");
  topic.Register();
  auto producer = topic.RegisterProducer();
  for (const char* level : {"REPEATABLE READ", "SERIALIZABLE"}) {
    INFO(level);
    RawConn own;
    own.Query(std::string("BEGIN ISOLATION LEVEL ") + level);
    Tx tx = Tx::Borrow(own.get());
    CHECK_THROWS_WITH(topic.Key("k").LockCompactionHead(tx),
                      Catch::Contains("isolation level") &&
                          Catch::Contains("READ COMMITTED"));
    CHECK_THROWS_AS(producer.ProduceInTx(tx, Counter{1}, Compacted("k")),
                    InvalidArgument);
    own.Query("COMMIT");
  }
  CHECK(db.raw().Int("SELECT count(*) FROM " + db.HeadTable("rr")) == 0);
  CHECK(db.raw().Int("SELECT count(*) FROM " + db.MessageTable("rr")) == 0);
  // READ COMMITTED borrowed works.
  RawConn own;
  own.Query("BEGIN ISOLATION LEVEL READ COMMITTED");
  Tx tx = Tx::Borrow(own.get());
  CHECK_FALSE(topic.Key("k").LockCompactionHead(tx));
  producer.ProduceInTx(tx, Counter{1}, Compacted("k"));
  own.Query("COMMIT");
  CHECK(topic.Key("k").CompactionHead()->message.value == 1);
}

TEST_CASE(
    "a producer that outlived Destroy and Register works on the new topic") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>("again");
  topic.Register();
  auto producer = topic.RegisterProducer();
  producer.Produce(Counter{1}, Compacted("k"));
  const std::int64_t old_id = db.TopicId("again");
  topic.Destroy();
  topic.Register();
  REQUIRE(db.TopicId("again") != old_id);

  CHECK(producer.Produce(Counter{2}, Compacted("k")).head_advanced);
  db.client().InTransaction([&](Tx& tx) {
    CHECK(producer.ProduceInTx(tx, Counter{3}, Compacted("k")).head_advanced);
  });
  CHECK(topic.Key("k").CompactionHead()->message.value == 3);
  CHECK(topic.Key("k").Messages(10).size() == 2);  // the old log went too

  // Really gone: TopicNotFound, and the caller's transaction lives on.
  topic.Destroy();
  CHECK_THROWS_AS(producer.Produce(Counter{4}, Compacted("k")), TopicNotFound);
  auto other = db.client().Topic<Counter>("other");
  other.Register();
  auto other_producer = other.RegisterProducer();
  db.client().InTransaction([&](Tx& tx) {
    CHECK_THROWS_AS(producer.ProduceInTx(tx, Counter{4}, Compacted("k")),
                    TopicNotFound);
    other_producer.ProduceInTx(tx, Counter{5}, Compacted("k"));
  });
  CHECK(other.Key("k").CompactionHead()->message.value == 5);
}

TEST_CASE(
    "an autocommit produce whose backend is terminated mid-statement did not "
    "commit") {
  if (testing::SkipOnCitus(
          "injects a fault with a trigger created through the coordinator; "
          "Citus refuses triggers on distributed tables"))
    return;
  LiveDb db;
  auto topic = db.client().Topic<Counter>("broken");
  topic.Register();
  auto producer = topic.RegisterProducer();
  // The insert stalls inside the server until its backend is terminated.
  db.raw().Query("CREATE FUNCTION " + db.QuotedSchema() +
                 ".stall() RETURNS trigger LANGUAGE plpgsql AS "
                 "$$BEGIN PERFORM pg_sleep(60); RETURN NEW; END$$");
  db.raw().Query("CREATE TRIGGER stall BEFORE INSERT ON " +
                 db.MessageTable("broken") + " FOR EACH ROW EXECUTE FUNCTION " +
                 db.QuotedSchema() + ".stall()");
  auto produce = std::async(std::launch::async, [&] {
    return producer.Produce(Counter{1}, Compacted("k"));
  });
  std::int64_t pid = 0;
  for (int i = 0; i < 200 && pid == 0; ++i) {
    pid = db.raw().Int(
        "SELECT coalesce(max(pid), 0) FROM pg_stat_activity WHERE wait_event = "
        "'PgSleep' "
        "AND strpos(query, 'compaction:Produce') > 0 AND strpos(query, $1) > 0",
        {db.schema()});
    if (pid == 0) std::this_thread::sleep_for(50ms);
  }
  REQUIRE(pid != 0);
  db.raw().Query("SELECT pg_terminate_backend($1)", {std::to_string(pid)});
  // The server answered the INSERT with its FATAL: COMMIT never ran.
  CHECK_THROWS_AS(produce.get(), compaction::ConnectionLost);
  CHECK(db.raw().Int("SELECT count(*) FROM " + db.MessageTable("broken")) == 0);
}

TEST_CASE("schema versions are bounded and produces that lose are counted") {
  LiveDb db;
  auto topic = db.client().Topic<RawMessage>("versions");
  topic.Register();
  auto producer = topic.RegisterProducer();
  for (int bad :
       {0, -1, kMaxSchemaVersion + 1, std::numeric_limits<int>::max()}) {
    INFO(bad);
    CHECK_THROWS_WITH(
        producer.Produce(RawMessage{bad, {{"v", 1}}}, Compacted("k")),
        Catch::Contains("schema_version must be in 1.."));
  }
  CHECK(db.raw().Int("SELECT count(*) FROM " + db.MessageTable("versions")) ==
        0);
  // A newer writer's version pins the key for the older one.
  auto newer = producer.Produce(RawMessage{2, {{"v", 1}}}, Compacted("k"));
  CHECK(newer.head_advanced);
  CHECK(newer.not_advanced == 0);
  auto older = producer.Produce(RawMessage{1, {{"v", 2}}}, Compacted("k", 100));
  CHECK_FALSE(older.head_advanced);
  CHECK(older.not_advanced == 1);
  auto copy = producer;  // copies share the count
  CHECK(copy.Produce(RawMessage{1, {{"v", 3}}}, Compacted("k", 200))
            .not_advanced == 2);
  // Plain appends never count.
  CHECK(producer.Produce(RawMessage{1, {{"v", 4}}}, {"k", std::nullopt})
            .not_advanced == 2);
  CHECK(topic.Key("k").CompactionHead()->message.schema_version == 2);
}

TEST_CASE(
    "the lock loop gives up after a bounded number of lost inserts, leaving "
    "the transaction usable") {
  if (testing::SkipOnCitus(
          "injects a fault with a trigger created through the coordinator; "
          "Citus refuses triggers on distributed tables"))
    return;
  LiveDb db;
  auto topic = db.client().Topic<Counter>("vanishing");
  topic.Register();
  // Every insert of the key row is swallowed, as if a janitor deleted the
  // row right after each insert won.
  db.raw().Query("CREATE FUNCTION " + db.QuotedSchema() +
                 ".swallow() RETURNS trigger LANGUAGE plpgsql AS "
                 "$$BEGIN RETURN NULL; END$$");
  db.raw().Query("CREATE TRIGGER swallow BEFORE INSERT ON " +
                 db.HeadTable("vanishing") + " FOR EACH ROW EXECUTE FUNCTION " +
                 db.QuotedSchema() + ".swallow()");
  Tx tx = db.client().Begin();
  CHECK_THROWS_WITH(topic.Key("k").LockCompactionHead(tx),
                    Catch::Contains("lost insert races"));
  CHECK_THROWS_AS(topic.Key("k").LockCompactionHead(tx), RetryableError);
  PGresult* r = PQexec(tx.native_handle(), "SELECT 1");
  CHECK(PQresultStatus(r) == PGRES_TUPLES_OK);
  PQclear(r);
  tx.Commit();
}

TEST_CASE("plain reads create no key row, and a rolled-back lock leaves none") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>("rows");
  topic.Register();
  CHECK_FALSE(topic.Key("read").CompactionHead());
  CHECK(topic.Key("read").Messages(10).empty());
  {
    Tx tx = db.client().Begin();
    CHECK_FALSE(topic.Key("locked").LockCompactionHead(tx));
    tx.Rollback();
  }
  CHECK(db.raw().Int("SELECT count(*) FROM " + db.HeadTable("rows")) == 0);
}

TEST_CASE(
    "the caller's own lock_timeout expiring is a LockTimeout that leaves the "
    "transaction usable") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>("own-timeout");
  topic.Register();
  auto producer = topic.RegisterProducer();
  producer.Produce(Counter{1}, Compacted("held"));
  RawConn holder;
  holder.Query("BEGIN");
  holder.Query("SELECT 1 FROM " + db.HeadTable("own-timeout") +
               " WHERE message_key = 'held' FOR UPDATE");
  db.client().InTransaction([&](Tx& tx) {
    PQclear(PQexec(tx.native_handle(), "SET LOCAL lock_timeout = '200ms'"));
    CHECK_THROWS_AS(topic.Key("held").LockCompactionHead(tx), LockTimeout);
    // Still usable: another key locks, a produce lands, the commit holds.
    CHECK_FALSE(topic.Key("free").LockCompactionHead(tx));
    producer.ProduceInTx(tx, Counter{7}, Compacted("free"));
  });
  holder.Query("COMMIT");
  CHECK(topic.Key("free").CompactionHead()->message.value == 7);
}
