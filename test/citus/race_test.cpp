// The janitor-versus-reader races on a coordinator and two workers
// (test/citus/with_cluster.sh), on 4-shard topics: each ordering forced
// inside the database (a trigger on the key's shard waits on a gate the
// test holds, testing::TriggerGate, seen in citus_lock_waits), the
// reader's wait seen where it happens, on the worker holding the key's
// shard (its pg_stat_activity, asked through run_command_on_workers),
// never by sleeping. test/pg's janitor and
// cleaner suites run on the cluster too (citus.pg_janitor), on one shard.
#include <catch2/catch.hpp>
#include <chrono>
#include <future>
#include <string>

#include "compaction/janitor.hpp"
#include "db_helpers.hpp"
#include "live_db.hpp"

using compaction::Janitor;
using compaction::Tx;
using testing::Counter;
using testing::LiveDb;
using testing::RawConn;
using testing::TriggerGate;
using namespace std::chrono_literals;

namespace {

constexpr const char* kSweepMarker = "compaction:SweepHeadless";
constexpr const char* kCleanerMarker = "compaction:CompactLog";
constexpr const char* kLockMarker = "compaction:LockCompactionHead";
constexpr const char* kProduceMarker = "compaction:Produce";

compaction::TopicConfig FourShards() {
  compaction::TopicConfig config;
  config.partitions = 4;
  config.retention = 0ms;
  config.tombstone_retention = 0ms;
  return config;
}

// Backends on the workers waiting on a heavyweight lock in a statement on
// this test's shards ("<schema>.<table>_<shard id>"), summed over workers.
std::int64_t WorkerLockWaits(RawConn& raw, const std::string& schema) {
  return raw.Int(
      "SELECT coalesce(pg_catalog.sum(result::bigint), 0) FROM "
      "pg_catalog.run_command_on_workers(pg_catalog.format('SELECT count(*) "
      "FROM pg_stat_activity WHERE wait_event_type = ''Lock'' AND "
      "strpos(query, %L) > 0', $1::text || '.'))",
      {schema});
}

// Waits until the marker's coordinator statement is in citus_lock_waits
// and `n` backends on the workers wait on a row or transaction lock for
// this test. (The gate's own wait is not one of them: a worker takes the
// reference table's lock through the coordinator, and waits for that
// reply with wait_event_type 'Extension'.)
bool WaitOnWorkers(RawConn& raw, const std::string& marker,
                   const std::string& schema, std::int64_t n) {
  if (!testing::WaitForLockWait(raw, marker, schema, 20s)) return false;
  return testing::WaitUntil([&] { return WorkerLockWaits(raw, schema) >= n; },
                            20s);
}

std::int64_t Count(RawConn& raw, const std::string& table,
                   const std::string& where) {
  return raw.Int("SELECT count(*) FROM " + table + " WHERE " + where);
}

}  // namespace

TEST_CASE(
    "janitor first on a worker: a locker waits for the sweep's DELETE, then "
    "recreates the row") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>("janitor-first");
  topic.Register(FourShards());
  const std::string table = db.HeadTable("janitor-first");
  auto key = topic.Key("k");
  db.client().InTransaction([&](Tx& tx) { key.LockCompactionHead(tx); });
  testing::Age(db.raw(), table, "k");
  const auto old_created =
      db.raw().Value("SELECT created_at::text FROM " + table);
  TriggerGate gate(db, table, "DELETE");
  gate.Close();

  Janitor janitor(db.client());
  auto sweep = std::async(std::launch::async, [&] {
    return janitor.SweepHeadless("janitor-first");
  });
  // The sweep locked k on its worker and is paused inside its DELETE.
  REQUIRE(testing::WaitForLockWait(db.raw(), kSweepMarker, db.schema(), 20s));
  auto locker = std::async(std::launch::async, [&] {
    return db.client().InTransaction(
        [&](Tx& tx) { return key.LockCompactionHead(tx).has_value(); });
  });
  // The locker's FOR UPDATE waits on the sweep's row lock, on the worker.
  REQUIRE(WaitOnWorkers(db.raw(), kLockMarker, db.schema(), 1));
  gate.Open();

  CHECK(sweep.get().deleted == 1);
  CHECK_FALSE(locker.get());  // locked the recreated row: no head
  REQUIRE(Count(db.raw(), table, "message_key = 'k'") == 1);
  CHECK(Count(db.raw(), table, "message_key = 'k' AND head_id IS NULL") == 1);
  // A new row: the swept row's created_at is gone.
  CHECK(db.raw().Value("SELECT created_at > $1::timestamptz FROM " + table,
                       {old_created}) == "t");
}

TEST_CASE(
    "janitor first on a worker vs a compacted Produce: the produce waits, "
    "then inserts a new row with its head") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>("janitor-produce");
  topic.Register(FourShards());
  auto producer = topic.RegisterProducer();
  const std::string table = db.HeadTable("janitor-produce");
  testing::InsertHeadless(db.raw(), table, "k-", 1, "2 hours");
  const std::string key = "k-1";
  TriggerGate gate(db, table, "DELETE");
  gate.Close();

  Janitor janitor(db.client());
  auto sweep = std::async(std::launch::async, [&] {
    return janitor.SweepHeadless("janitor-produce");
  });
  REQUIRE(testing::WaitForLockWait(db.raw(), kSweepMarker, db.schema(), 20s));
  auto produce = std::async(std::launch::async, [&] {
    return producer.Produce(Counter{42}, testing::Compacted(key));
  });
  // The produce's head upsert waits on the sweep's transaction.
  REQUIRE(WaitOnWorkers(db.raw(), kProduceMarker, db.schema(), 1));
  gate.Open();

  CHECK(sweep.get().deleted == 1);
  const compaction::ProduceResult produced = produce.get();
  CHECK(produced.head_advanced);
  auto head = topic.Key(key).CompactionHead();
  REQUIRE(head.has_value());
  CHECK(head->message.value == 42);
  // Born with the message, not the swept row's 2 h old created_at.
  CHECK(Count(db.raw(), table,
              "message_key = '" + key +
                  "' AND head_id = " + std::to_string(produced.id) +
                  " AND created_at > now() - interval '1 hour' AND "
                  "idle_since IS NULL") == 1);
}

TEST_CASE(
    "cleaner first on a worker vs a locker on a tombstoned key: the locker "
    "waits and finds the row headless") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>("cleaner-first");
  topic.Register(FourShards());
  auto producer = topic.RegisterProducer();
  producer.ProduceTombstone("k");
  const std::string head = db.HeadTable("cleaner-first");
  TriggerGate gate(db, head, "UPDATE",
                   "OLD.head_id IS NOT NULL AND NEW.head_id IS NULL");
  gate.Close();
  Janitor janitor(db.client());
  auto pass = std::async(std::launch::async,
                         [&] { return janitor.CompactLog("cleaner-first"); });
  REQUIRE(testing::WaitForLockWait(db.raw(), kCleanerMarker, db.schema(), 20s));
  auto locker = std::async(std::launch::async, [&] {
    return db.client().InTransaction([&](Tx& tx) {
      const bool had_value = topic.Key("k").LockCompactionHead(tx).has_value();
      producer.ProduceInTx(tx, Counter{8}, testing::Compacted("k"));
      return had_value;
    });
  });
  REQUIRE(WaitOnWorkers(db.raw(), kLockMarker, db.schema(), 1));
  gate.Open();
  REQUIRE(pass.wait_for(20s) == std::future_status::ready);
  CHECK(pass.get().tombstones_expired == 1);
  REQUIRE(locker.wait_for(20s) == std::future_status::ready);
  CHECK_FALSE(locker.get());  // the tombstone had expired: headless
  CHECK(topic.Key("k").CompactionHead()->message.value == 8);
  // No head points at a deleted message.
  CHECK(db.raw().Int("SELECT count(*) FROM " + head +
                     " h WHERE h.head_id IS "
                     "NOT NULL AND NOT EXISTS (SELECT 1 FROM " +
                     db.MessageTable("cleaner-first") +
                     " m WHERE m.id = h.head_id AND m.partition = "
                     "h.partition)") == 0);
}

TEST_CASE(
    "cleaner first on a worker vs a producer advancing the key: the pass "
    "keeps the head it saw, the next pass removes it") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>("cleaner-produce");
  topic.Register(FourShards());
  auto producer = topic.RegisterProducer();
  const auto v1 = producer.Produce(Counter{1}, testing::Compacted("a"));
  const auto v2 = producer.Produce(Counter{2}, testing::Compacted("a"));
  const std::string message = db.MessageTable("cleaner-produce");
  TriggerGate gate(db, message, "DELETE");
  gate.Close();
  Janitor janitor(db.client());
  // The pass has chosen what to delete (v2 was the head then) and waits.
  auto pass = std::async(std::launch::async,
                         [&] { return janitor.CompactLog("cleaner-produce"); });
  REQUIRE(testing::WaitForLockWait(db.raw(), kCleanerMarker, db.schema(), 20s));
  const auto v3 = producer.Produce(Counter{3}, testing::Compacted("a"));
  CHECK(v3.head_advanced);
  gate.Open();
  REQUIRE(pass.wait_for(20s) == std::future_status::ready);
  CHECK(pass.get().deleted == 1);
  auto exists = [&](std::int64_t id) {
    return Count(db.raw(), message, "id = " + std::to_string(id)) == 1;
  };
  CHECK_FALSE(exists(v1.id));
  CHECK(exists(v2.id));  // the head that pass saw
  CHECK(exists(v3.id));
  CHECK(janitor.CompactLog("cleaner-produce").deleted == 1);
  CHECK_FALSE(exists(v2.id));
  CHECK(topic.Key("a").CompactionHead()->id == v3.id);
}
