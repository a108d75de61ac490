// KeyHandle::Update (the locked read-modify-write verb), KeyHandle::
// ProduceInTx, and the refusal of a keyed produce without compaction to a
// key the transaction locked.
#include <atomic>
#include <catch2/catch.hpp>
#include <thread>

#include "citus_profile.hpp"
#include "live_db.hpp"
#include "round_trips.hpp"

using compaction::CompactionOptions;
using compaction::InvalidArgument;
using compaction::Outgoing;
using compaction::ProduceOptions;
using compaction::RetryableError;
using compaction::Tx;
using compaction::UpdateOptions;
using testing::Compacted;
using testing::Counter;
using testing::LiveDb;

namespace {

// Makes every `every`-th message insert of `topic` fail with a
// serialization failure (40001, a RetryableError), counted by a sequence
// (not rolled back with the failure).
void InjectFailures(LiveDb& db, const std::string& topic, int every) {
  const std::string s = db.QuotedSchema();
  db.raw().Query("CREATE SEQUENCE " + s + ".injected");
  db.raw().Query("CREATE FUNCTION " + s +
                 ".inject() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN "
                 "IF pg_catalog.nextval('" +
                 s + ".injected') % " + std::to_string(every) +
                 " = 0 THEN RAISE EXCEPTION 'injected' USING ERRCODE = "
                 "'40001'; END IF; RETURN NEW; END$$");
  db.raw().Query("CREATE TRIGGER inject BEFORE INSERT ON " +
                 db.MessageTable(topic) + " FOR EACH ROW EXECUTE FUNCTION " +
                 s + ".inject()");
}

std::int64_t Messages(LiveDb& db, const std::string& topic) {
  return db.raw().Int("SELECT count(*) FROM " + db.MessageTable(topic));
}

std::optional<Counter> PlusOne(const std::optional<Counter>& current) {
  return Counter{current ? current->value + 1 : 1};
}

}  // namespace

TEST_CASE("Update from 8 threads x 50 on one key ends at 400") {
  if (testing::SkipOnCitus(
          "injects a fault with a trigger created through the coordinator; "
          "Citus refuses triggers on distributed tables "
          "(test/citus/library_test.cpp runs concurrent increments and the "
          "seed's race on the cluster)"))
    return;
  LiveDb db;
  constexpr int kThreads = 8;
  constexpr int kPerThread = 50;
  auto client = db.NewClient(kThreads);
  auto topic = client.Topic<Counter>("updates");
  topic.Register();
  InjectFailures(db, "updates", 25);
  auto key = topic.Key("k");
  std::atomic<int> retries{0};
  std::atomic<int> errors{0};
  UpdateOptions options;
  options.attempts = 5;
  options.on_retry = [&](const compaction::Error& e, int) {
    if (dynamic_cast<const RetryableError*>(&e) != nullptr) ++retries;
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      try {
        for (int i = 0; i < kPerThread; ++i) key.Update(PlusOne, options);
      } catch (const std::exception& e) {
        ++errors;
        UNSCOPED_INFO(e.what());
      }
    });
  }
  for (auto& t : threads) t.join();
  REQUIRE(errors == 0);
  CHECK(key.CompactionHead()->message.value == kThreads * kPerThread);
  CHECK(Messages(db, "updates") == kThreads * kPerThread);
  // Every injected failure was retried and counted, and nothing else was.
  const std::int64_t drawn =
      db.raw().Int("SELECT last_value FROM " + db.QuotedSchema() + ".injected");
  CHECK(retries == drawn / 25);
  CHECK(retries > 0);
}

TEST_CASE("Update returns the new head and passes the current value") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>("update-head");
  topic.Register();
  auto key = topic.Key("k");
  std::vector<std::optional<Counter>> seen;
  auto record = [&](const std::optional<Counter>& current) {
    seen.push_back(current);
    return PlusOne(current);
  };
  auto first = key.Update(record);
  REQUIRE(first.has_value());
  CHECK(first->message.value == 1);
  CHECK(first->message_key == "k");
  CHECK(first->compaction_rank == 0);
  CHECK(first->id == key.CompactionHead()->id);
  auto second = key.Update(record);
  CHECK(second->message.value == 2);
  REQUIRE(seen.size() == 2);
  CHECK_FALSE(seen[0].has_value());
  CHECK(seen[1]->value == 1);
  // A tombstone head reads as no value.
  topic.RegisterProducer().ProduceTombstone("k");
  CHECK(key.Update(record)->message.value == 1);
  CHECK_FALSE(seen[2].has_value());
}

TEST_CASE("Update produces nothing when fn returns nullopt") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>("update-none");
  topic.Register();
  auto none = [](const std::optional<Counter>&) -> std::optional<Counter> {
    return std::nullopt;
  };
  // A new key: not even the headless row the lock created stays.
  CHECK_FALSE(topic.Key("new").Update(none).has_value());
  CHECK(db.raw().Int("SELECT count(*) FROM " + db.HeadTable("update-none")) ==
        0);
  topic.Key("k").Update(PlusOne);
  CHECK_FALSE(topic.Key("k").Update(none).has_value());
  CHECK(Messages(db, "update-none") == 1);
  CHECK(topic.Key("k").CompactionHead()->message.value == 1);
}

TEST_CASE("Update keeps the head's rank, and refuses a value that would lose") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>("update-rank");
  topic.Register();
  topic.RegisterProducer().Produce(Counter{10}, Compacted("k", 5));
  auto key = topic.Key("k");
  auto updated = key.Update(PlusOne);
  CHECK(updated->compaction_rank == 5);
  CHECK(key.CompactionHead()->message.value == 11);
  UpdateOptions lower;
  lower.rank = 4;
  CHECK_THROWS_WITH(key.Update(PlusOne, lower),
                    Catch::Contains("would not become the key's head") &&
                        Catch::Contains("nothing was written"));
  CHECK_THROWS_AS(key.Update(PlusOne, lower), InvalidArgument);
  CHECK(Messages(db, "update-rank") == 2);
  UpdateOptions higher;
  higher.rank = 6;
  CHECK(key.Update(PlusOne, higher)->compaction_rank == 6);
  CHECK(key.CompactionHead()->message.value == 12);
}

TEST_CASE("Update gives up after its attempts and passes fn's errors on") {
  if (testing::SkipOnCitus(
          "injects a fault with a trigger created through the coordinator; "
          "Citus refuses triggers on distributed tables"))
    return;
  LiveDb db;
  auto topic = db.client().Topic<Counter>("update-fail");
  topic.Register();
  InjectFailures(db, "update-fail", 1);  // every produce fails
  auto key = topic.Key("k");
  std::vector<int> attempts;
  UpdateOptions options;
  options.on_retry = [&](const compaction::Error&, int attempt) {
    attempts.push_back(attempt);
  };
  int calls = 0;
  auto counted = [&](const std::optional<Counter>& c) {
    ++calls;
    return PlusOne(c);
  };
  CHECK_THROWS_AS(key.Update(counted, options), RetryableError);
  CHECK(calls == 3);
  CHECK(attempts == std::vector<int>{1, 2});
  // fn's own exception: no retry.
  calls = 0;
  CHECK_THROWS_WITH(
      key.Update(
          [&](const std::optional<Counter>&) -> std::optional<Counter> {
            ++calls;
            throw std::runtime_error("from fn");
          },
          options),
      "from fn");
  CHECK(calls == 1);
  options.attempts = 0;
  CHECK_THROWS_AS(key.Update(counted, options), InvalidArgument);
  CHECK(db.raw().Int("SELECT count(*) FROM " + db.HeadTable("update-fail")) ==
        0);
  CHECK(Messages(db, "update-fail") == 0);
}

// fn's own library calls may fail with the errors Update retries; what fn
// throws is passed on at once all the same (fn may have done what a retry
// would repeat).
TEST_CASE("Update passes on fn's RetryableError and ConnectionLost at once") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>("update-fn-throws");
  topic.Register();
  auto key = topic.Key("k");
  UpdateOptions options;
  int retries = 0;
  options.on_retry = [&](const compaction::Error&, int) { ++retries; };
  int calls = 0;
  CHECK_THROWS_AS(
      key.Update(
          [&](const std::optional<Counter>&) -> std::optional<Counter> {
            ++calls;
            throw RetryableError("fn", "40001", "fn's own call");
          },
          options),
      RetryableError);
  CHECK_THROWS_AS(
      key.Update(
          [&](const std::optional<Counter>&) -> std::optional<Counter> {
            ++calls;
            throw compaction::ConnectionLost("fn", "fn's own call");
          },
          options),
      compaction::ConnectionLost);
  CHECK(calls == 2);
  CHECK(retries == 0);
  CHECK(Messages(db, "update-fn-throws") == 0);
}

// The lock rides with BEGIN and the topic's look-up, the produce with
// COMMIT.
TEST_CASE("Update takes two round trips") {
  LiveDb db;
  compaction::Client client = db.NewClient(1);
  auto topic = client.Topic<Counter>("update-trips");
  topic.Register();  // cached by the client
  auto key = topic.Key("k");
  PGconn* conn = nullptr;
  client.InTransaction([&](Tx& tx) {
    key.LockCompactionHead(tx);
    conn = tx.native_handle();
  });
  key.Update(PlusOne);  // prepares the produce
  std::optional<compaction::StoredMessage<Counter>> value;
  CHECK(testing::RoundTrips(conn, [&] { value = key.Update(PlusOne); }) == 2);
  REQUIRE(value.has_value());
  CHECK(value->message.value == 2);
  CHECK(key.CompactionHead()->message.value == 2);
}

TEST_CASE("Update retries a connection lost before its COMMIT") {
  if (testing::ThroughPooler()) return;  // the backend is the pooler's
  LiveDb db;
  auto client = db.NewClient(1);
  auto topic = client.Topic<Counter>("update-lost");
  topic.Register();
  auto key = topic.Key("k");
  std::vector<std::string> errors;
  UpdateOptions options;
  options.on_retry = [&](const compaction::Error& e, int) {
    errors.push_back(e.what());
  };
  int calls = 0;
  auto value = key.Update(
      [&](const std::optional<Counter>& current) {
        if (++calls == 1) {
          // The Update's own backend, holding the key's lock (this test's
          // schema: other tests lock keys at the same time).
          CHECK(db.raw().Int(
                    "SELECT count(pg_catalog.pg_terminate_backend(pid)) FROM "
                    "pg_stat_activity WHERE state = 'idle in transaction' "
                    "AND strpos(query, 'compaction:LockCompactionHead') > 0 "
                    "AND strpos(query, $1) > 0 AND pid <> pg_backend_pid()",
                    {db.schema()}) == 1);
        }
        return PlusOne(current);
      },
      options);
  CHECK(calls == 2);
  REQUIRE(errors.size() == 1);
  CHECK(value->message.value == 1);
  CHECK(Messages(db, "update-lost") == 1);
}

TEST_CASE(
    "a key handle produces compacted to its own key inside a transaction") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>("key-produce");
  topic.Register();
  auto key = topic.Key("k");
  db.client().InTransaction([&](Tx& tx) {
    auto head = key.LockCompactionHead(tx);
    CHECK_FALSE(head.has_value());
    auto result = key.ProduceInTx(tx, Counter{7});
    CHECK(result.head_advanced);
  });
  auto head = key.CompactionHead();
  REQUIRE(head.has_value());
  CHECK(head->message.value == 7);
  CHECK(head->message_key == "k");
  CHECK(head->compaction_rank == 0);
  db.client().InTransaction(
      [&](Tx& tx) { key.ProduceInTx(tx, Counter{8}, CompactionOptions{3}); });
  CHECK(key.CompactionHead()->compaction_rank == 3);
}

TEST_CASE(
    "a keyed produce without compaction to a key the transaction locked is "
    "refused before anything is written") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>("footgun");
  topic.Register();
  auto producer = topic.RegisterProducer();
  auto key = topic.Key("hits");
  Tx tx = db.client().Begin();
  key.LockCompactionHead(tx);
  CHECK_THROWS_WITH(
      producer.ProduceInTx(tx, Counter{1}, ProduceOptions{"hits", {}}),
      Catch::Contains("LockCompactionHead") &&
          Catch::Contains("ProduceOptions::compaction") &&
          Catch::Contains("KeyHandle::ProduceInTx"));
  CHECK_THROWS_AS(
      producer.ProduceInTx(tx, Counter{1}, ProduceOptions{"hits", {}}),
      InvalidArgument);
  // Still usable; uncompacted keyed messages to keys it did not lock, and
  // compacted ones to the locked key, are fine.
  producer.ProduceInTx(tx, Counter{2}, ProduceOptions{"other", {}});
  producer.ProduceInTx(tx, Counter{3}, Compacted("hits"));
  tx.Commit();
  CHECK(Messages(db, "footgun") == 2);
  CHECK(key.CompactionHead()->message.value == 3);
  // Another transaction holds no lock on the key: accepted there.
  db.client().InTransaction([&](Tx& t) {
    producer.ProduceInTx(t, Counter{4}, ProduceOptions{"hits", {}});
  });
  CHECK(Messages(db, "footgun") == 3);
}

TEST_CASE(
    "a batch in the transaction that locked a key refuses an uncompacted "
    "message to it, naming the element, before anything is written") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>("footgun_batch");
  topic.Register();
  auto producer = topic.RegisterProducer();
  auto key = topic.Key("hits");
  Tx tx = db.client().Begin();
  key.LockCompactionHead(tx);
  const std::vector<Outgoing<Counter>> batch{
      {Counter{1}, Compacted("other")},
      {Counter{2}, ProduceOptions{"hits", {}}},
  };
  CHECK_THROWS_WITH(
      producer.ProduceBatchInTx(tx, batch),
      Catch::Contains("element 1") && Catch::Contains("LockCompactionHead"));
  // Nothing was sent: the transaction is usable and holds no message.
  producer.ProduceInTx(tx, Counter{3}, Compacted("hits"));
  tx.Commit();
  CHECK(Messages(db, "footgun_batch") == 1);
  CHECK(key.CompactionHead()->message.value == 3);
}
