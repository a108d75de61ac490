// LockCompactionHead: the transactional lock loop under live races.
// Each race forces its ordering by watching pg_stat_activity for the
// waiting backend, never by sleeping.
#include <catch2/catch.hpp>
#include <future>
#include <thread>

#include "citus_profile.hpp"
#include "live_db.hpp"
#include "round_trips.hpp"

using compaction::CompactionOptions;
using compaction::ProduceOptions;
using compaction::Tx;
using testing::Compacted;
using testing::Counter;
using testing::Increment;
using testing::LiveDb;
using testing::RoundTrips;

namespace {

// Runs `sql` on `tx`'s connection (inside it: the BEGIN goes first).
void ExecIn(Tx& tx, const char* sql) {
  PGresult* r = PQexec(tx.native_handle(), sql);
  const bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
  PQclear(r);
  REQUIRE(ok);
}

// Calls of `topic`'s lock_<id> counted so far by `tx`'s backend (pending
// statistics, which span transactions: compare two readings), once `tx`
// ran SET LOCAL track_functions = 'pl'.
std::int64_t LockFunctionCalls(Tx& tx, LiveDb& db, const std::string& topic) {
  const std::string fn = db.QuotedSchema() + ".lock_" +
                         std::to_string(db.TopicId(topic)) + "(text, boolean)";
  const char* value = fn.c_str();
  PGresult* r =
      PQexecParams(tx.native_handle(),
                   "SELECT coalesce(pg_catalog.pg_stat_get_xact_function_calls("
                   "$1::regprocedure), 0)",
                   1, nullptr, &value, nullptr, nullptr, 0);
  REQUIRE(PQresultStatus(r) == PGRES_TUPLES_OK);
  const std::int64_t calls = std::stoll(PQgetvalue(r, 0, 0));
  PQclear(r);
  return calls;
}

// Sets lock_timeout = 100 ms in a transaction of `mine`'s client that
// already locked key "free" (so the topic is touched and no look-up reads
// the setting: the lock's first attempt runs, and must not wait), then
// locks key "busy", which `holder` holds: a LockTimeout that leaves the
// transaction usable (it commits a produce to "free" after it). Rolls
// `holder` back.
void TimesOutAndStaysUsable(compaction::Client& client,
                            compaction::TopicHandle<Counter>& mine,
                            compaction::Producer<Counter>& producer,
                            Tx& holder) {
  Tx tx = client.Begin();
  REQUIRE_FALSE(mine.Key("free").LockCompactionHead(tx));
  PQclear(PQexec(tx.native_handle(), "SET LOCAL lock_timeout = '100ms'"));
  CHECK_THROWS_AS(mine.Key("busy").LockCompactionHead(tx),
                  compaction::LockTimeout);
  producer.ProduceInTx(tx, Counter{5}, Compacted("free"));
  tx.Commit();
  holder.Rollback();
  CHECK(mine.Key("free").CompactionHead()->message.value == 5);
}

}  // namespace

TEST_CASE("two first updates of an absent key compose") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>("counters");
  topic.Register();
  auto producer = topic.RegisterProducer();
  auto key = topic.Key("fresh");

  Tx a = db.client().Begin();
  REQUIRE_FALSE(key.LockCompactionHead(a).has_value());  // A ensured the row

  auto b = std::async(std::launch::async,
                      [&] { return Increment(db.client(), key, producer); });
  // B found no committed row, tried to insert it and waits on A's row.
  REQUIRE(testing::WaitForLockWait(db.raw(), "compaction:LockCompactionHead",
                                   db.schema()));
  producer.ProduceInTx(a, Counter{1}, Compacted("fresh"));
  a.Commit();

  CHECK(b.get() == 2);  // B read A's value, not the empty state
  auto head = key.CompactionHead();
  REQUIRE(head.has_value());
  CHECK(head->message.value == 2);
  CHECK(key.Messages(10).size() == 2);
}

TEST_CASE(
    "a reader waiting on a materialized head reads the value committed before "
    "it got the lock") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>("counters");
  topic.Register();
  auto producer = topic.RegisterProducer();
  auto key = topic.Key("k");
  producer.Produce(Counter{10}, Compacted("k"));

  Tx a = db.client().Begin();
  REQUIRE(key.LockCompactionHead(a)->message.value == 10);
  auto b = std::async(std::launch::async,
                      [&] { return Increment(db.client(), key, producer); });
  // B waits in SELECT ... FOR UPDATE on the existing row.
  REQUIRE(testing::WaitForLockWait(db.raw(), "compaction:LockCompactionHead",
                                   db.schema()));
  producer.ProduceInTx(a, Counter{11}, Compacted("k"));
  a.Commit();
  CHECK(b.get() == 12);
  CHECK(key.CompactionHead()->message.value == 12);
}

TEST_CASE("concurrent increments on fresh keys lose nothing") {
  LiveDb db;
  auto client = db.NewClient(8);
  auto topic = client.Topic<Counter>("stress");
  topic.Register();
  auto producer = topic.RegisterProducer();
  const std::vector<std::string> keys = {"s1", "s2", "s3"};
  constexpr int kThreads = 8;
  constexpr int kPerThread = 100;
  std::vector<std::thread> threads;
  std::atomic<int> errors{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      try {
        for (int i = 0; i < kPerThread; ++i) {
          for (const auto& k : keys) Increment(client, topic.Key(k), producer);
        }
      } catch (const std::exception& e) {
        ++errors;
        UNSCOPED_INFO(e.what());
      }
    });
  }
  for (auto& t : threads) t.join();
  REQUIRE(errors == 0);
  for (const auto& k : keys) {
    INFO(k);
    CHECK(topic.Key(k).CompactionHead()->message.value ==
          kThreads * kPerThread);
  }
}

TEST_CASE("a lost insert race is recovered by the loop") {
  if (testing::SkipOnCitus(
          "inserts head rows behind the library's back without the partition "
          "column, which the Citus head table requires (the writer names it); "
          "and it reads the insert's transactionid wait in the coordinator's "
          "pg_locks, which holds only the worker's"))
    return;
  LiveDb db;
  auto topic = db.client().Topic<Counter>("race");
  topic.Register();
  const std::string head_table = db.HeadTable("race");

  // Another transaction inserts the key row and keeps it uncommitted.
  testing::RawConn other;
  other.Query("BEGIN");
  other.Query("INSERT INTO " + head_table +
              " (message_key, created_at, updated_at, idle_since) VALUES "
              "('k', '2001-01-01', '2001-01-01', '2001-01-01')");

  auto locker = std::async(std::launch::async, [&] {
    return db.client().InTransaction([&](Tx& tx) {
      return topic.Key("k").LockCompactionHead(tx).has_value();
    });
  });
  // The locker's SELECT saw no row; its INSERT now waits on ours: on our
  // transaction id, as a speculative insert does (a row lock would be a
  // tuple wait).
  REQUIRE(testing::WaitForLockWait(db.raw(), "compaction:LockCompactionHead",
                                   db.schema()));
  // This test's backend only (its schema in the statement): other tests
  // run lock races at the same time.
  CHECK(db.raw().Int("SELECT count(*) FROM pg_locks l JOIN pg_stat_activity "
                     "a USING (pid) WHERE NOT l.granted AND l.locktype = "
                     "'transactionid' AND strpos(a.query, "
                     "'compaction:LockCompactionHead') > 0 AND "
                     "strpos(a.query, $1) > 0",
                     {db.schema()}) == 1);
  other.Query("COMMIT");
  CHECK_FALSE(locker.get());  // headless, locked after looping

  auto row = db.raw().Query(
      "SELECT created_at::date::text, updated_at > '2001-01-02', "
      "head_id IS NULL FROM " +
      head_table + " WHERE message_key = 'k'");
  REQUIRE(row.size() == 1);
  CHECK(row[0][0] == "2001-01-01");  // the other transaction's row survived
  CHECK(row[0][1] == "t");           // and was locked again (refreshed)
  CHECK(row[0][2] == "t");
}

TEST_CASE("a lock timeout is typed and leaves the transaction usable") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>("timeouts");
  topic.Register();
  auto producer = topic.RegisterProducer();
  auto key = topic.Key("busy");
  producer.Produce(Counter{1}, Compacted("busy"));

  Tx holder = db.client().Begin();
  REQUIRE(key.LockCompactionHead(holder).has_value());

  Tx waiter = db.client().Begin();
  const auto started = std::chrono::steady_clock::now();
  CHECK_THROWS_AS(
      key.LockCompactionHead(waiter, {std::chrono::milliseconds(100)}),
      compaction::LockTimeout);
  CHECK(std::chrono::steady_clock::now() - started < std::chrono::seconds(5));
  // Still usable: another key can be locked and produced, and it commits.
  auto other = topic.Key("free");
  CHECK_FALSE(other.LockCompactionHead(waiter, {std::chrono::milliseconds(100)})
                  .has_value());
  producer.ProduceInTx(waiter, Counter{5}, Compacted("free"));
  waiter.Commit();
  holder.Rollback();
  CHECK(other.CompactionHead()->message.value == 5);
}

TEST_CASE("lock timeout restores the caller's lock_timeout") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>("restore");
  topic.Register();
  Tx tx = db.client().Begin();
  PGconn* conn = tx.native_handle();
  PQclear(PQexec(conn, "SET LOCAL lock_timeout = '7s'"));
  topic.Key("k").LockCompactionHead(tx, {std::chrono::milliseconds(250)});
  PGresult* r = PQexec(conn, "SHOW lock_timeout");
  CHECK(std::string(PQgetvalue(r, 0, 0)) == "7s");
  PQclear(r);
}

TEST_CASE(
    "LockCompactionHead refreshes a headless row and leaves created_at alone") {
  if (testing::SkipOnCitus(
          "inserts head rows behind the library's back without the partition "
          "column, which the Citus head table requires (the writer names it)"))
    return;
  LiveDb db;
  auto topic = db.client().Topic<Counter>("refresh");
  topic.Register();
  const std::string table = db.HeadTable("refresh");
  // A headless row locked long ago (inserted old: created_at is immutable).
  db.raw().Query("INSERT INTO " + table +
                 " (message_key, created_at, updated_at, idle_since) "
                 "VALUES ('k', '2001-01-01', '2001-01-01', '2001-01-01')");
  db.client().InTransaction(
      [&](Tx& tx) { topic.Key("k").LockCompactionHead(tx); });
  auto row = db.raw().Query(
      "SELECT created_at::date::text, updated_at > now() - interval '1 "
      "minute', "
      "idle_since = updated_at FROM " +
      table);
  REQUIRE(row.size() == 1);
  CHECK(row[0][0] == "2001-01-01");
  CHECK(row[0][1] == "t");
  CHECK(row[0][2] == "t");
}

TEST_CASE("locking a materialized head does not touch its row") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>("untouched");
  topic.Register();
  topic.RegisterProducer().Produce(Counter{1}, Compacted("k"));
  const std::string table = db.HeadTable("untouched");
  db.raw().Query("UPDATE " + table + " SET updated_at = '2001-01-01'");
  const auto version = db.raw().Value("SELECT xmin::text FROM " + table);
  db.client().InTransaction([&](Tx& tx) {
    CHECK(topic.Key("k").LockCompactionHead(tx)->message.value == 1);
  });
  CHECK(db.raw().Value("SELECT updated_at::date::text FROM " + table) ==
        "2001-01-01");
  // No new row version either (0660's upsert writes one per lock).
  CHECK(db.raw().Value("SELECT xmin::text FROM " + table) == version);
}

TEST_CASE("LockCompactionHead takes one round trip in every state of the key") {
  if (testing::SkipOnCitus(
          "inserts head rows behind the library's back without the partition "
          "column, which the Citus head table requires (the writer names it)"))
    return;
  LiveDb db;
  auto topic = db.client().Topic<Counter>("trips");
  topic.Register();
  auto producer = topic.RegisterProducer();
  producer.Produce(Counter{1}, Compacted("head"));
  producer.ProduceTombstone("tombstone");
  const std::string table = db.HeadTable("trips");
  db.raw().Query("INSERT INTO " + table +
                 " (message_key, created_at, updated_at, idle_since) VALUES "
                 "('headless', now(), now(), now())");
  // Statements are prepared on a connection's first use of them: the
  // client has one connection, warmed up by a first lock.
  compaction::Client client = db.NewClient(1);
  auto topic1 = client.Topic<Counter>("trips");
  client.InTransaction(
      [&](Tx& tx) { topic1.Key("warm-up").LockCompactionHead(tx); });
  for (const char* key : {"new", "headless", "head", "tombstone"}) {
    INFO(key);
    Tx tx = client.Begin();
    // The first touch of the topic in a transaction resolves it too.
    CHECK(RoundTrips(tx.native_handle(),
                     [&] { topic1.Key("other").LockCompactionHead(tx); }) == 2);
    std::optional<compaction::StoredMessage<Counter>> head;
    CHECK(RoundTrips(tx.native_handle(), [&] {
            head = topic1.Key(key).LockCompactionHead(tx);
          }) == 1);
    CHECK(head.has_value() == (std::string(key) == "head"));
    tx.Commit();
    CHECK(db.raw().Int(
              "SELECT count(*) FROM " + table + " WHERE message_key = $1",
              {std::string(key)}) == 1);
  }
}

// A transaction's first statement carries its BEGIN, and a first lock on
// a topic the client has cached carries the topic's look-up too: a
// lock-only transaction is that round trip and COMMIT's.
TEST_CASE("a lock-only transaction takes two round trips in every key state") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>("trips");
  topic.Register();
  auto producer = topic.RegisterProducer();
  producer.Produce(Counter{1}, Compacted("head"));
  producer.ProduceTombstone("tombstone");
  testing::InsertHeadless(db.raw(), db.HeadTable("trips"), "headless", 1);
  compaction::Client client = db.NewClient(1);
  auto topic1 = client.Topic<Counter>("trips");
  topic1.Register();  // cached by the client
  PGconn* conn = nullptr;
  client.InTransaction([&](Tx& tx) {
    topic1.Key("warm-up").LockCompactionHead(tx);
    conn = tx.native_handle();
  });
  // Each key locked alone in a transaction; only "head" has a value.
  auto each_takes_two = [&](std::initializer_list<const char*> keys) {
    for (const char* key : keys) {
      INFO(key);
      std::optional<compaction::StoredMessage<Counter>> head;
      CHECK(RoundTrips(conn, [&] {
              client.InTransaction([&](Tx& tx) {
                head = topic1.Key(key).LockCompactionHead(tx);
              });
            }) == 2);
      CHECK(head.has_value() == (std::string(key) == "head"));
    }
  };
  each_takes_two({"new", "headless1", "head", "tombstone"});
  // Seen with a head now, these two go the seed's way: two statements in
  // the first round trip instead of lock_<id>, still two round trips (once
  // the connection has prepared them: a warm-up).
  client.InTransaction(
      [&](Tx& tx) { topic1.Key("head").LockCompactionHead(tx); });
  each_takes_two({"head", "tombstone"});
  // An empty transaction sends nothing at all.
  CHECK(RoundTrips(conn, [&] { client.InTransaction([](Tx&) {}); }) == 0);
}

// A service that never registers the topic (an operator did) and only
// locks: the first transaction's look-up fills the client's cache, so the
// next ones send it with the lock. The pipelined look-up is a statement of
// its own (it reads the fingerprint column directly, the first look-up
// through to_jsonb): where the client prepares statements (not behind a
// transaction pooler), the second transaction prepares it on the
// connection first, one round trip, once per connection.
TEST_CASE(
    "a client that only locks pipelines the look-up from its second "
    "transaction on") {
  LiveDb db;
  db.client().Topic<Counter>("trips_unregistered").Register();
  compaction::Client client = db.NewClient(1);
  auto topic = client.Topic<Counter>("trips_unregistered");
  PGconn* conn = nullptr;
  client.InTransaction([&](Tx& tx) {
    topic.Key("first").LockCompactionHead(tx);
    conn = tx.native_handle();
  });
  const bool prepares = client.options().prepared_statements;
  CHECK(RoundTrips(conn, [&] {
          client.InTransaction(
              [&](Tx& tx) { topic.Key("second").LockCompactionHead(tx); });
        }) == (prepares ? 3 : 2));
  CHECK(RoundTrips(conn, [&] {
          client.InTransaction(
              [&](Tx& tx) { topic.Key("third").LockCompactionHead(tx); });
        }) == 2);
}

// A key this client saw with a head is locked the seed's way: a plain
// SELECT .. FOR UPDATE, then the head read as a statement of its own. The
// read's snapshot must come after the lock, or a lock that waited for a
// writer returns the head that writer replaced.
TEST_CASE("a key locked the seed's way returns the head its lock waited for") {
  if (testing::SkipOnCitus("the seed's way is not taken on Citus")) return;
  LiveDb db;
  auto topic = db.client().Topic<Counter>("seed_way");
  topic.Register();
  auto producer = topic.RegisterProducer();
  producer.Produce(Counter{1}, Compacted("k"));
  compaction::Client client = db.NewClient(1);
  auto mine = client.Topic<Counter>("seed_way");
  client.InTransaction([&](Tx& tx) {
    CHECK(mine.Key("k").LockCompactionHead(tx)->message.value == 1);
  });
  Tx writer = db.client().Begin();
  REQUIRE(topic.Key("k").LockCompactionHead(writer)->message.value == 1);
  producer.ProduceInTx(writer, Counter{2}, Compacted("k"));
  auto seen = std::async(std::launch::async, [&] {
    return client.InTransaction([&](Tx& tx) {
      return mine.Key("k").LockCompactionHead(tx)->message.value;
    });
  });
  // Waiting in the seed's statement, not in lock_<id>.
  REQUIRE(testing::WaitForLockWait(db.raw(), "FOR UPDATE OF h", db.schema()));
  writer.Commit();
  CHECK(seen.get() == 2);
}

// Which statement locked: lock_<id> for a key the client has not seen
// with a head, the seed's plain SELECT .. FOR UPDATE once it has.
TEST_CASE("a key seen with a head is locked without calling lock_<id>") {
  if (testing::SkipOnCitus("the seed's way is not taken on Citus")) return;
  LiveDb db;
  auto topic = db.client().Topic<Counter>("seed_way_calls");
  topic.Register();
  topic.RegisterProducer().Produce(Counter{1}, Compacted("k"));
  compaction::Client client = db.NewClient(1);
  auto mine = client.Topic<Counter>("seed_way_calls");
  auto calls_locking = [&](const char* key) {
    Tx tx = client.Begin();
    ExecIn(tx, "SET LOCAL track_functions = 'pl'");
    const std::int64_t before = LockFunctionCalls(tx, db, "seed_way_calls");
    mine.Key(key).LockCompactionHead(tx);
    const std::int64_t calls =
        LockFunctionCalls(tx, db, "seed_way_calls") - before;
    tx.Commit();
    return calls;
  };
  CHECK(calls_locking("k") == 1);    // not seen yet
  CHECK(calls_locking("k") == 0);    // seen with a head
  CHECK(calls_locking("new") == 1);  // inserted headless
  CHECK(calls_locking("new") == 1);  // headless: never a hint
}

// The seed's way is taken on a hint: a key whose row was deleted since
// (the janitor, the cleaner) or is headless again is then locked by
// lock_<id>, one round trip more, with the function's effects (the row
// inserted or its TTL restarted), and the hint is dropped.
TEST_CASE(
    "a key seen with a head whose row is gone or headless is still "
    "locked") {
  if (testing::SkipOnCitus("writes head rows behind the library's back; the "
                           "seed's way is not taken on Citus")) {
    return;
  }
  LiveDb db;
  auto topic = db.client().Topic<Counter>("seed_way_stale");
  topic.Register();
  auto producer = topic.RegisterProducer();
  producer.Produce(Counter{1}, Compacted("gone"));
  producer.Produce(Counter{1}, Compacted("headless"));
  producer.Produce(Counter{1}, Compacted("warm-up"));
  compaction::Client client = db.NewClient(1);
  auto mine = client.Topic<Counter>("seed_way_stale");
  PGconn* conn = nullptr;
  // The connection prepares the seed's statements on their first use.
  for (const char* key : {"gone", "headless", "warm-up", "warm-up"}) {
    client.InTransaction([&](Tx& tx) {
      REQUIRE(mine.Key(key).LockCompactionHead(tx).has_value());
      conn = tx.native_handle();
    });
  }
  const std::string table = db.HeadTable("seed_way_stale");
  db.raw().Query("DELETE FROM " + table + " WHERE message_key = 'gone'");
  db.raw().Query("UPDATE " + table +
                 " SET head_id = NULL, schema_version = NULL, "
                 "compaction_rank = NULL, updated_at = '2001-01-01', "
                 "idle_since = '2001-01-01' WHERE message_key = 'headless'");
  for (const char* key : {"gone", "headless"}) {
    INFO(key);
    std::optional<compaction::StoredMessage<Counter>> head =
        compaction::StoredMessage<Counter>{};
    CHECK(RoundTrips(conn, [&] {
            client.InTransaction(
                [&](Tx& tx) { head = mine.Key(key).LockCompactionHead(tx); });
          }) == 3);
    CHECK_FALSE(head.has_value());
  }
  CHECK(db.raw().Int("SELECT count(*) FROM " + table +
                     " WHERE head_id IS NULL AND idle_since > "
                     "pg_catalog.now() - interval '1 minute'") == 2);
  for (const char* key : {"gone", "headless"}) {
    INFO(key);
    CHECK(RoundTrips(conn, [&] {
            client.InTransaction(
                [&](Tx& tx) { mine.Key(key).LockCompactionHead(tx); });
          }) == 2);
  }
}

// The seed's way must not wait under the caller's own lock_timeout: its
// expiry there would abort the caller's transaction. The statement then
// locks nothing, and the function's guarded retry times out in a savepoint.
TEST_CASE(
    "a key seen with a head times out under the caller's lock_timeout "
    "and leaves the transaction usable") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>("seed_way_timeout");
  topic.Register();
  auto producer = topic.RegisterProducer();
  producer.Produce(Counter{1}, Compacted("busy"));
  compaction::Client client = db.NewClient(1);
  auto mine = client.Topic<Counter>("seed_way_timeout");
  auto mine_producer = mine.RegisterProducer();
  // Seen with a head, then locked the seed's way once (which prepares its
  // statements on the connection).
  for (int i = 0; i < 2; ++i) {
    client.InTransaction(
        [&](Tx& tx) { REQUIRE(mine.Key("busy").LockCompactionHead(tx)); });
  }
  if (!testing::CitusProfile()) {  // where the seed's way is taken
    // Free, under a lock_timeout: the look-up (the long way here, after
    // the SETs) reads the setting, so the guarded lock runs in a savepoint
    // at once, without the seed's way (which would lock nothing) or
    // lock_<id> answering "guard".
    Tx tx = client.Begin();
    ExecIn(tx, "SET LOCAL lock_timeout = '5s'");
    ExecIn(tx, "SET LOCAL track_functions = 'pl'");
    const std::int64_t before = LockFunctionCalls(tx, db, "seed_way_timeout");
    CHECK(RoundTrips(tx.native_handle(), [&] {
            REQUIRE(mine.Key("busy").LockCompactionHead(tx));
          }) == 4);  // look-up, SAVEPOINT, lock_<id>, RELEASE
    CHECK(LockFunctionCalls(tx, db, "seed_way_timeout") - before == 1);
    tx.Commit();
  }
  Tx holder = db.client().Begin();
  REQUIRE(topic.Key("busy").LockCompactionHead(holder));
  TimesOutAndStaysUsable(client, mine, mine_producer, holder);
}

namespace {

// Locks as many keys never seen as it takes a client's odds to be full
// (NewKeyOdds::kCap, lib/src/head_hints.hpp), each in a transaction of its
// own: a client whose unhinted keys keep turning out new sends the insert
// first, and a few keys with a head later do not change that.
void LockNewKeys(compaction::Client& client,
                 compaction::TopicHandle<Counter>& topic) {
  constexpr int n = 32;
  for (int i = 0; i < n; ++i) {
    client.InTransaction([&](Tx& tx) {
      REQUIRE_FALSE(
          topic.Key("fresh-" + std::to_string(i)).LockCompactionHead(tx));
    });
  }
}

}  // namespace

// Once a topic's unhinted keys have mostly been new, a lock sends its
// insert alone: a new key is one statement, a headless row is refreshed
// as lock_<id> would, and a key with a head (locked by the insert, not
// read) costs one round trip more, lock_<id> reading it.
TEST_CASE("a client whose unseen keys were new locks the next with an insert") {
  if (testing::SkipOnCitus("the insert way is not taken on Citus")) return;
  LiveDb db;
  auto topic = db.client().Topic<Counter>("insert_way");
  topic.Register();
  auto producer = topic.RegisterProducer();
  producer.Produce(Counter{3}, Compacted("head"));
  producer.ProduceTombstone("tombstone");
  const std::string table = db.HeadTable("insert_way");
  testing::InsertHeadless(db.raw(), table, "headless", 1);
  compaction::Client client = db.NewClient(1);
  auto mine = client.Topic<Counter>("insert_way");
  LockNewKeys(client, mine);
  int other = 0;
  // Round trips of a key's lock and lock_<id>'s calls, in a transaction
  // that locked another new key first (which resolved the topic).
  auto lock = [&](const char* key, std::optional<Counter>& value) {
    Tx tx = client.Begin();
    ExecIn(tx, "SET LOCAL track_functions = 'pl'");
    mine.Key("other-" + std::to_string(other++)).LockCompactionHead(tx);
    const std::int64_t before = LockFunctionCalls(tx, db, "insert_way");
    std::optional<compaction::StoredMessage<Counter>> head;
    const int trips = RoundTrips(tx.native_handle(), [&] {
      head = mine.Key(key).LockCompactionHead(tx);
    });
    const std::int64_t calls = LockFunctionCalls(tx, db, "insert_way") - before;
    tx.Commit();
    value.reset();
    if (head) value = head->message;
    return std::pair{trips, calls};
  };
  std::optional<Counter> value;
  CHECK(lock("new", value) == std::pair{1, std::int64_t{0}});
  CHECK_FALSE(value);
  CHECK(lock("headless1", value) == std::pair{1, std::int64_t{0}});
  CHECK_FALSE(value);
  CHECK(db.raw().Int("SELECT count(*) FROM " + table +
                     " WHERE message_key IN ('new', 'headless1') AND head_id "
                     "IS NULL AND idle_since = updated_at AND updated_at > "
                     "now() - interval '1 minute'") == 2);
  // Locked by the insert without a row version, as lock_<id> locks it.
  const std::optional<std::string> head_version = db.raw().Value(
      "SELECT xmin::text FROM " + table + " WHERE message_key = 'head'");
  CHECK(lock("head", value) == std::pair{2, std::int64_t{1}});
  REQUIRE(value);
  CHECK(value->value == 3);
  CHECK(db.raw().Value("SELECT xmin::text FROM " + table +
                       " WHERE message_key = 'head'") == head_version);
  CHECK(lock("tombstone", value) == std::pair{2, std::int64_t{1}});
  CHECK_FALSE(value);
  // Seen with a head now: the seed's way, whatever the odds (its
  // statements prepared on the connection by a first use).
  CHECK(lock("head", value).second == 0);
  CHECK(lock("head", value) == std::pair{1, std::int64_t{0}});
  REQUIRE(value);
  CHECK(value->value == 3);
  CHECK(db.raw().Int("SELECT count(*) FROM " + table +
                     " WHERE message_key IN ('new', 'headless1', 'head', "
                     "'tombstone')") == 4);
}

// The insert way under races, each ordering forced: a concurrent
// transaction's insert of the same new key, committed with a head, rolled
// back, or committed headless; and a key another transaction holds under
// the caller's lock_timeout, whose expiry must leave the transaction
// usable (the insert locks nothing then; the guarded lock_<id> times out
// in a savepoint).
TEST_CASE("the insert way waits for a concurrent insert and locks its result") {
  if (testing::SkipOnCitus("the insert way is not taken on Citus")) return;
  LiveDb db;
  auto topic = db.client().Topic<Counter>("insert_way_race");
  topic.Register();
  auto producer = topic.RegisterProducer();
  compaction::Client client = db.NewClient(1);
  auto mine = client.Topic<Counter>("insert_way_race");
  auto mine_producer = mine.RegisterProducer();
  LockNewKeys(client, mine);
  enum class End { kHead, kRollback, kHeadless };
  for (const End end : {End::kHead, End::kRollback, End::kHeadless}) {
    const std::string key = "race-" + std::to_string(static_cast<int>(end));
    INFO(key);
    // The other client's odds are fresh: it inserts through lock_<id>.
    Tx other = db.client().Begin();
    REQUIRE_FALSE(topic.Key(key).LockCompactionHead(other));
    if (end == End::kHead)
      producer.ProduceInTx(other, Counter{7}, Compacted(key));
    auto seen = std::async(std::launch::async, [&] {
      return client.InTransaction([&](Tx& tx) {
        auto head = mine.Key(key).LockCompactionHead(tx);
        return head ? head->message.value : -1;
      });
    });
    const bool waiting =
        testing::WaitForLockWait(db.raw(), "ON CONFLICT", db.schema());
    if (!waiting) other.Rollback();  // or seen's destructor waits for ever
    REQUIRE(waiting);
    if (end == End::kRollback) {
      other.Rollback();
    } else {
      other.Commit();
    }
    CHECK(seen.get() == (end == End::kHead ? 7 : -1));
    CHECK(db.raw().Int("SELECT count(*) FROM " +
                           db.HeadTable("insert_way_race") +
                           " WHERE message_key = $1",
                       {key}) == 1);
  }
  Tx holder = db.client().Begin();
  REQUIRE_FALSE(topic.Key("busy").LockCompactionHead(holder));
  TimesOutAndStaysUsable(client, mine, mine_producer, holder);
  CHECK(db.raw().Int("SELECT count(*) FROM " + db.HeadTable("insert_way_race") +
                     " WHERE message_key = 'busy'") == 0);
}

// A session lock_timeout (here the client's session_settings) keeps the
// insert from doing anything; the look-up sent with it says so, and the
// guarded lock runs in a savepoint at once, without asking lock_<id> first.
TEST_CASE("under a session lock_timeout the insert way goes to the savepoint") {
  if (testing::SkipOnCitus("the insert way is not taken on Citus")) return;
  LiveDb db;
  db.client().Topic<Counter>("insert_way_timeout").Register();
  compaction::ClientOptions options = testing::ClientOptionsForTests();
  options.schema = db.schema();
  options.pool_size = 1;
  options.session_settings = {{"lock_timeout", "5s"},
                              {"track_functions", "pl"}};
  compaction::Client client =
      compaction::Client::Connect(testing::ClientConninfo(), options);
  auto mine = client.Topic<Counter>("insert_way_timeout");
  mine.Register();  // cached: the look-up goes with the lock
  LockNewKeys(client, mine);
  PGconn* conn = nullptr;
  client.InTransaction([&](Tx& tx) { conn = tx.native_handle(); });
  // BEGIN, the look-up and the insert; SAVEPOINT; lock_<id>; RELEASE;
  // COMMIT.
  CHECK(RoundTrips(conn, [&] {
          client.InTransaction([&](Tx& tx) {
            CHECK_FALSE(mine.Key("new").LockCompactionHead(tx));
          });
        }) == 5);
  // The insert was sent: lock_<id> ran once, guarded (the function's way
  // calls it twice, its unguarded answer 'g' first). Counted in the
  // server's statistics, which each transaction flushes as it ends.
  const std::string fn = db.QuotedSchema() + ".lock_" +
                         std::to_string(db.TopicId("insert_way_timeout")) +
                         "(text, boolean)";
  auto calls_locking = [&](const char* key) {
    client.InTransaction([&](Tx& tx) {
      CHECK_FALSE(mine.Key(key).LockCompactionHead(tx));
      PQclear(PQexec(tx.native_handle(),
                     "SELECT pg_catalog.pg_stat_force_next_flush()"));
    });
    return db.raw().Int(
        "SELECT coalesce(sum(calls), 0) FROM pg_catalog.pg_stat_user_functions "
        "WHERE funcid = $1::regprocedure",
        {fn});
  };
  const std::int64_t before = calls_locking("flushed");
  CHECK(calls_locking("newer") - before == 1);
  CHECK(db.raw().Int("SELECT count(*) FROM " +
                     db.HeadTable("insert_way_timeout") +
                     " WHERE message_key IN ('new', 'newer')") == 2);
}

// The look-up that rides with a transaction's first lock still decides:
// when the cached id now names another topic's objects, the lock that ran
// there with it is rolled back and the key is locked in its own topic.
TEST_CASE(
    "a first lock through a cached id that now names another topic locks "
    "only its own topic") {
  LiveDb db;
  if (testing::SkipOnCitus("drops and installs the schema; one node shows "
                           "the cache")) {
    return;
  }
  compaction::Client client = db.NewClient(1);
  auto before = client.Topic<Counter>("mine");
  before.Register();
  testing::ReuseTopicIdElsewhere(db, "mine", "other");
  Tx tx = client.Begin();
  CHECK_FALSE(before.Key("k").LockCompactionHead(tx).has_value());
  PGconn* conn = tx.native_handle();
  tx.Commit();
  CHECK(db.raw().Int("SELECT count(*) FROM " + db.HeadTable("other")) == 0);
  CHECK(db.raw().Int("SELECT count(*) FROM " + db.HeadTable("mine") +
                     " WHERE message_key = 'k'") == 1);
  // The look-up corrected the cache: the next first lock is one round trip
  // again, COMMIT the other.
  CHECK(RoundTrips(conn, [&] {
          client.InTransaction(
              [&](Tx& t) { before.Key("k2").LockCompactionHead(t); });
        }) == 2);
}

// LockCompactionHead's documented savepoint rule: the library cannot see
// the caller's own SAVEPOINT / ROLLBACK TO SAVEPOINT, so the key stays
// remembered as locked (on the safe side) after the rollback released it.
TEST_CASE(
    "a rollback to the caller's own savepoint does not forget a locked key") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>("savepoint_locked");
  topic.Register();
  auto producer = topic.RegisterProducer();
  Tx tx = db.client().Begin();
  auto exec = [&](const char* sql) {
    PGresult* r = PQexec(tx.native_handle(), sql);
    const bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
    PQclear(r);
    REQUIRE(ok);
  };
  exec("SAVEPOINT mine");
  CHECK_FALSE(topic.Key("k").LockCompactionHead(tx).has_value());
  exec("ROLLBACK TO SAVEPOINT mine");
  CHECK_THROWS_AS(producer.ProduceInTx(tx, Counter{1}, ProduceOptions{"k", {}}),
                  compaction::InvalidArgument);
  // Refused before anything was sent: the transaction is still usable.
  producer.ProduceInTx(tx, Counter{2}, ProduceOptions{"other", {}});
  tx.Commit();
  CHECK(db.raw().Int("SELECT count(*) FROM " +
                     db.MessageTable("savepoint_locked") +
                     " WHERE message_key = 'k'") == 0);
  CHECK(db.raw().Int("SELECT count(*) FROM " +
                     db.MessageTable("savepoint_locked")) == 1);
}

// Statements built once per topic are found on a connection by a slot
// number of their client; a transaction of another client, whose slots
// name other statements, must still run the handle's own statement.
TEST_CASE("a topic handle locks through another client's transaction") {
  LiveDb db;
  auto a = db.client().Topic<Counter>("slots_a");
  a.Register();
  compaction::Client other = db.NewClient(1);
  auto b = other.Topic<Counter>("slots_b");
  b.Register();
  // Each client's first topic takes the same slots: b's lock is prepared
  // in the slot that a's lock has in its own client.
  other.InTransaction([&](Tx& tx) { b.Key("b-key").LockCompactionHead(tx); });
  db.client().InTransaction(
      [&](Tx& tx) { a.Key("a-key").LockCompactionHead(tx); });
  Tx tx = other.Begin();
  CHECK_FALSE(a.Key("crossed").LockCompactionHead(tx).has_value());
  tx.Commit();
  CHECK(db.raw().Int("SELECT count(*) FROM " + db.HeadTable("slots_a") +
                     " WHERE message_key = 'crossed'") == 1);
  CHECK(db.raw().Int("SELECT count(*) FROM " + db.HeadTable("slots_b") +
                     " WHERE message_key = 'crossed'") == 0);
}

TEST_CASE(
    "a lock_timeout beyond PostgreSQL's limit is rejected before any "
    "statement") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>("limits");
  topic.Register();
  db.client().InTransaction([&](Tx& tx) {
    CHECK_THROWS_AS(
        topic.Key("k").LockCompactionHead(tx, {std::chrono::hours(24 * 30)}),
        compaction::InvalidArgument);
    CHECK_THROWS_AS(
        topic.Key("k").LockCompactionHead(tx, {std::chrono::milliseconds(0)}),
        compaction::InvalidArgument);
    CHECK_FALSE(
        topic.Key("k").LockCompactionHead(tx).has_value());  // still usable
  });
}

// Each lock prepares its statements on the pooled connection before the
// pipeline; a cache that starts over (DEALLOCATE ALL at 512 statements)
// while preparing the second of them must not leave the first one unknown
// to the server. Three starting offsets make the start-over land on each of
// the three statements a first lock of a key prepares (lock, read, insert).
TEST_CASE("locks keep working when the prepared-statement cache starts over") {
  LiveDb db;
  constexpr int kTopics = 200;  // 3 statements each: the cache starts over
  for (int i = 0; i < kTopics; ++i)
    db.client().Topic<Counter>("t" + std::to_string(i)).Register();
  for (int offset = 0; offset < 3; ++offset) {
    INFO("offset " << offset);
    compaction::Client client = db.NewClient(1);
    for (int i = 0; i < offset; ++i) {
      CHECK_FALSE(client.Topic<Counter>("t" + std::to_string(i))
                      .Key("none")
                      .CompactionHead());
    }
    const std::string key = "k" + std::to_string(offset);
    for (int i = 0; i < kTopics; ++i) {
      auto topic = client.Topic<Counter>("t" + std::to_string(i));
      client.InTransaction([&](Tx& tx) {
        // A new key: the lock finds nothing, so the read and the headless
        // insert follow; three statements of this topic prepared anew.
        REQUIRE_FALSE(topic.Key(key).LockCompactionHead(tx));
      });
    }
    for (int i = 0; i < kTopics; i += 37) {
      CHECK(db.raw().Int("SELECT count(*) FROM " +
                         db.HeadTable("t" + std::to_string(i)) +
                         " WHERE message_key = '" + key +
                         "' AND head_id IS NULL") == 1);
    }
  }
}

namespace {

// What the server said about a refused statement.
struct Refusal {
  std::string sqlstate;
  std::string constraint;
  std::string message;
};

Refusal Refuse(testing::RawConn& raw, const std::string& sql) {
  PGresult* r = PQexec(raw.get(), sql.c_str());
  auto field = [&](int code) {
    const char* v = PQresultErrorField(r, code);
    return std::string(v == nullptr ? "" : v);
  };
  Refusal out{field(PG_DIAG_SQLSTATE), field(PG_DIAG_CONSTRAINT_NAME),
              field(PG_DIAG_MESSAGE_PRIMARY)};
  PQclear(r);
  return out;
}

}  // namespace

// Each row satisfies every NOT NULL column, so the named CHECK is what
// refuses it: the table itself keeps the head columns all-or-none and
// idle_since set exactly while headless (equal to updated_at), whatever
// code path writes to it.
TEST_CASE("the head table's CHECKs refuse inconsistent rows by name") {
  if (testing::SkipOnCitus(
          "inserts head rows behind the library's back without the partition "
          "column, which the Citus head table requires (the writer names it) "
          "(Citus refuses such a row with 22004 before any CHECK)"))
    return;
  LiveDb db;
  auto topic = db.client().Topic<Counter>("checks");
  topic.Register();
  const std::string table = db.HeadTable("checks");
  const std::string id = std::to_string(db.TopicId("checks"));
  const std::string all_or_none = "compaction_head_" + id + "_head_all_or_none";
  const std::string idle = "compaction_head_" + id + "_idle_since_iff_headless";
  const std::string insert =
      "INSERT INTO " + table +
      " (message_key, head_id, schema_version, compaction_rank, created_at, "
      "updated_at, idle_since) VALUES ";
  struct Case {
    const char* what;
    std::string values;
    std::string constraint;
  };
  const std::vector<Case> cases = {
      {"head_id set, schema_version NULL",
       "('a', 1, NULL, 0, now(), now(), NULL)", all_or_none},
      {"headless without idle_since",
       "('b', NULL, NULL, NULL, now(), now(), NULL)", idle},
      {"materialized with idle_since set",
       "('c', 1, 1, 0, now(), now(), now())", idle},
      {"headless with idle_since != updated_at",
       "('d', NULL, NULL, NULL, now(), now(), now() - interval '1 second')",
       idle},
  };
  for (const Case& c : cases) {
    INFO(c.what);
    CHECK(db.raw().TryExec(insert + c.values) == "23514");
    const Refusal refusal = Refuse(db.raw(), insert + c.values);
    CHECK(refusal.sqlstate == "23514");
    CHECK(refusal.constraint == c.constraint);
    CHECK_THAT(refusal.message, Catch::Contains(c.constraint));
  }
  // The well-formed shapes of the same rows are accepted, so the refusals
  // above were the CHECKs and nothing else.
  CHECK(
      db.raw().TryExec(insert + "('a', 1, 1, 0, now(), now(), NULL)").empty());
  CHECK(db.raw()
            .TryExec(insert + "('b', NULL, NULL, NULL, now(), now(), now())")
            .empty());
  CHECK(db.raw().Int("SELECT count(*) FROM " + table) == 2);
}

TEST_CASE("16 threads x 25 increments on one absent key give exactly 400") {
  LiveDb db;
  constexpr int kThreads = 16;
  constexpr int kPerThread = 25;
  auto client = db.NewClient(kThreads);
  auto topic = client.Topic<Counter>("stress16");
  topic.Register();
  auto producer = topic.RegisterProducer();
  auto key = topic.Key("absent");
  REQUIRE_FALSE(key.CompactionHead().has_value());
  std::vector<std::thread> threads;
  std::atomic<int> errors{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      try {
        for (int i = 0; i < kPerThread; ++i) Increment(client, key, producer);
      } catch (const std::exception& e) {
        ++errors;
        UNSCOPED_INFO(e.what());
      }
    });
  }
  for (auto& t : threads) t.join();
  REQUIRE(errors == 0);
  auto head = key.CompactionHead();
  REQUIRE(head.has_value());
  CHECK(head->message.value == kThreads * kPerThread);
  CHECK(db.raw().Int("SELECT count(*) FROM " + db.MessageTable("stress16") +
                     " WHERE message_key = 'absent'") == kThreads * kPerThread);
  // Every value 1..400 was written exactly once: no increment read a stale
  // head.
  CHECK(
      db.raw().Int("SELECT count(DISTINCT (payload->>'value')::bigint) FROM " +
                   db.MessageTable("stress16") +
                   " WHERE message_key = 'absent'") == kThreads * kPerThread);
}
