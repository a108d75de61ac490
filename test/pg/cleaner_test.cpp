// Log compaction against a live database: retention, tombstones and
// Janitor::CompactLog. Races force their ordering inside the database (a
// trigger that waits on a gate table the test holds, observed through
// pg_stat_activity), never by sleeping.
#include <atomic>
#include <catch2/catch.hpp>
#include <future>
#include <map>
#include <mutex>
#include <thread>

#include "citus_profile.hpp"
#include "db_helpers.hpp"
#include "live_db.hpp"

using compaction::CompactionOptions;
using compaction::CompactResult;
using compaction::Janitor;
using compaction::kKeepForever;
using compaction::ProduceOptions;
using compaction::RawMessage;
using compaction::TopicConfig;
using compaction::Tx;
using testing::Compacted;
using testing::Counter;
using testing::Increment;
using testing::LiveDb;
using testing::RawConn;
using testing::TriggerGate;
using namespace std::chrono_literals;

namespace {

constexpr const char* kCleanerMarker = "compaction:CompactLog";
constexpr const char* kLockMarker = "compaction:LockCompactionHead";

// Retention 0 for messages and tombstones: everything the cleaner may
// remove goes at its next pass.
TopicConfig Immediate() {
  TopicConfig config;
  config.retention = 0ms;
  config.tombstone_retention = 0ms;
  return config;
}

std::int64_t Count(RawConn& raw, const std::string& table,
                   const std::string& where = "true") {
  return raw.Int("SELECT count(*) FROM " + table + " WHERE " + where);
}

// Heads whose message is gone: the invariant says none, ever.
std::int64_t DanglingHeads(LiveDb& db, const std::string& topic) {
  return db.raw().Int("SELECT count(*) FROM " + db.HeadTable(topic) +
                      " h WHERE h.head_id IS NOT NULL AND NOT EXISTS (SELECT 1 "
                      "FROM " +
                      db.MessageTable(topic) + " m WHERE m.id = h.head_id)");
}

bool MessageExists(LiveDb& db, const std::string& topic, std::int64_t id) {
  return Count(db.raw(), db.MessageTable(topic),
               "id = " + std::to_string(id)) == 1;
}

// Runs passes until one finds nothing to do (at most `passes`); a pass
// skipped on another owner's claim did not look.
void CompactUntilIdle(Janitor& janitor, const std::string& topic,
                      int passes = 5) {
  for (int i = 0; i < passes; ++i) {
    const CompactResult r = janitor.CompactLog(topic);
    if (!r.skipped && r.deleted == 0 && r.tombstones_expired == 0) return;
  }
}

// Passes enough for the message walk's final position to pass every
// message now in the log (the walk's position turns final one pass after it
// walked).
void WalkPastEverything(Janitor& janitor, const std::string& topic) {
  for (int i = 0; i < 3; ++i) janitor.CompactLog(topic);
}

// A pass on another thread; the future fails the test if it does not end.
std::future<CompactResult> CompactAsync(Janitor& janitor,
                                        const std::string& topic) {
  return std::async(std::launch::async,
                    [&janitor, topic] { return janitor.CompactLog(topic); });
}

}  // namespace

TEST_CASE("retention 0 removes every message but the heads") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>("r0");
  const compaction::TopicInfo info = topic.Register(Immediate());
  CHECK(info.retention == 0ms);
  CHECK(info.tombstone_retention == 0ms);
  auto producer = topic.RegisterProducer();
  producer.Produce(Counter{1}, Compacted("a"));  // superseded
  const auto head = producer.Produce(Counter{2}, Compacted("a"));
  const auto lost = producer.Produce(Counter{3}, Compacted("a", -1));
  CHECK_FALSE(lost.head_advanced);  // lost on arrival
  producer.Produce(Counter{4},
                   ProduceOptions{"a", std::nullopt});  // keyed, not compacted
  producer.Produce(Counter{5});                         // no key
  const auto other = producer.Produce(Counter{6}, Compacted("b"));

  Janitor janitor(db.client());
  const CompactResult r = janitor.CompactLog("r0");
  CHECK(r.deleted == 4);
  CHECK(r.tombstones_expired == 0);
  CHECK_FALSE(r.skipped);
  CHECK_FALSE(r.stopped_at_limit);
  CHECK(Count(db.raw(), db.MessageTable("r0")) == 2);
  CHECK(MessageExists(db, "r0", head.id));
  CHECK(MessageExists(db, "r0", other.id));
  CHECK(topic.Key("a").CompactionHead()->message.value == 2);
  CHECK(topic.Key("a").Messages(10).size() == 1);
  CHECK(DanglingHeads(db, "r0") == 0);
  // Bookkeeping, as the sweep's.
  const compaction::TopicStats stats = topic.Stats();
  CHECK(stats.cleaner.last_deleted_rows == 4);
  CHECK(stats.cleaner.total_deleted_rows == 4);
  CHECK(stats.cleaner.last_success_at.has_value());
  CHECK(stats.cleaner.last_error.empty());
  // Retention 0: the lag is the time since its last batch looked.
  CHECK(stats.cleaner_lag < 5s);
  // A second pass has nothing to do.
  CHECK(janitor.CompactLog("r0").deleted == 0);
}

TEST_CASE("kKeepForever and young messages stay") {
  LiveDb db;
  auto forever = db.client().Topic<Counter>("forever");
  TopicConfig keep;
  keep.retention = kKeepForever;
  keep.tombstone_retention = kKeepForever;
  CHECK(forever.Register(keep).retention == kKeepForever);
  auto young = db.client().Topic<Counter>("young");
  TopicConfig hour;
  hour.retention = 1h;
  hour.tombstone_retention = 1h;
  young.Register(hour);
  for (auto* t : {&forever, &young}) {
    auto p = t->RegisterProducer();
    p.Produce(Counter{1}, Compacted("a"));
    p.Produce(Counter{2}, Compacted("a"));
    p.Produce(Counter{3});
    p.ProduceTombstone("b");
  }
  Janitor janitor(db.client());
  for (const char* name : {"forever", "young"}) {
    INFO(name);
    const CompactResult r = janitor.CompactLog(name);
    CHECK(r.deleted == 0);
    CHECK(r.tombstones_expired == 0);
    CHECK(Count(db.raw(), db.MessageTable(name)) == 4);
  }
  CHECK(forever.Stats().cleaner_lag == 0ms);
  // The young topic's messages age out once the retention shrinks.
  young.Register(Immediate());
  const CompactResult r = janitor.CompactLog("young");
  CHECK(r.deleted == 3);  // a's first version, the unkeyed, b's tombstone
  CHECK(r.tombstones_expired == 1);
  CHECK(Count(db.raw(), db.MessageTable("young")) == 1);
}

TEST_CASE(
    "a tombstone head means no value until a later produce revives the key") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>("tomb");
  TopicConfig keep;
  keep.retention = kKeepForever;
  keep.tombstone_retention = kKeepForever;
  topic.Register(keep);
  auto producer = topic.RegisterProducer();
  producer.Produce(Counter{1}, Compacted("k"));
  producer.Produce(Counter{9}, Compacted("other"));
  const auto tombstone = producer.ProduceTombstone("k");
  CHECK(tombstone.head_advanced);
  CHECK_FALSE(topic.Key("k").CompactionHead().has_value());
  // Listed heads skip it; typed history skips it; raw history shows it.
  const auto heads = topic.ListCompactionHeads();
  REQUIRE(heads.size() == 1);
  CHECK(heads[0].message_key == "other");
  const auto typed = topic.Key("k").Messages(10);
  REQUIRE(typed.size() == 1);
  CHECK(typed[0].message.value == 1);
  const auto raw = db.client().Topic<RawMessage>("tomb").Key("k").Messages(10);
  REQUIRE(raw.size() == 2);
  CHECK(raw[0].message.tombstone);
  CHECK(raw[0].message.payload.is_null());
  CHECK(raw[0].id == tombstone.id);
  CHECK_FALSE(raw[1].message.tombstone);
  // The lock still locks the row and says "no value".
  db.client().InTransaction([&](Tx& tx) {
    CHECK_FALSE(topic.Key("k").LockCompactionHead(tx).has_value());
    CHECK(db.raw().TryExec("SELECT 1 FROM " + db.HeadTable("tomb") +
                           " WHERE message_key = 'k' FOR UPDATE NOWAIT") ==
          "55P03");
    producer.ProduceInTx(tx, Counter{2}, Compacted("k"));
  });
  CHECK(topic.Key("k").CompactionHead()->message.value == 2);
  // A tombstone that ranks lower than the head loses like any message.
  const auto low = producer.ProduceTombstone("k", CompactionOptions{-1});
  CHECK_FALSE(low.head_advanced);
  CHECK(topic.Key("k").CompactionHead()->message.value == 2);
}

TEST_CASE(
    "an expired tombstone turns its key headless, then the janitor removes the "
    "row") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>("expire");
  TopicConfig config = Immediate();
  config.headless_ttl = 1ms;
  topic.Register(config);
  auto producer = topic.RegisterProducer();
  producer.Produce(Counter{1}, Compacted("k"));
  producer.ProduceTombstone("k");
  producer.ProduceTombstone("j");  // a key that never had a value

  Janitor janitor(db.client());
  const CompactResult r = janitor.CompactLog("expire");
  CHECK(r.tombstones_expired == 2);
  CHECK(r.deleted == 3);
  CHECK(Count(db.raw(), db.MessageTable("expire")) == 0);
  CHECK(Count(db.raw(), db.HeadTable("expire"), "head_id IS NULL") == 2);
  CHECK(topic.Stats().total_tombstones_expired == 2);
  CHECK(topic.Stats().last_tombstones_expired == 2);
  std::this_thread::sleep_for(5ms);  // the 1 ms TTL, not an ordering
  CHECK(janitor.SweepHeadless("expire").deleted == 2);
  CHECK(Count(db.raw(), db.HeadTable("expire")) == 0);
}

// A value the message walk passed while it was its key's head is not met by
// that walk again; the tombstone that later deletes the key must take it
// along when it expires, or the deleted value stays readable in the log.
TEST_CASE(
    "an expiring tombstone removes the value the cleaner walked as its head") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>("walked");
  topic.Register(Immediate());
  auto producer = topic.RegisterProducer();
  const auto value = producer.Produce(Counter{1}, Compacted("k"));
  producer.Produce(Counter{5}, Compacted("other"));
  Janitor janitor(db.client());
  WalkPastEverything(janitor, "walked");
  REQUIRE(MessageExists(db, "walked", value.id));  // still the head
  const auto tombstone = producer.ProduceTombstone("k");

  const CompactResult r = janitor.CompactLog("walked");
  CHECK(r.tombstones_expired == 1);
  CHECK(r.deleted == 2);
  CHECK_FALSE(MessageExists(db, "walked", tombstone.id));
  CHECK_FALSE(MessageExists(db, "walked", value.id));
  CHECK(Count(db.raw(), db.MessageTable("walked"), "message_key = 'k'") == 0);
  CHECK(Count(db.raw(), db.MessageTable("walked")) == 1);  // "other"'s head
  CHECK(db.client().Topic<RawMessage>("walked").Key("k").Messages(10).empty());
  CHECK(Count(db.raw(), db.HeadTable("walked"), "head_id IS NULL") == 1);
  CHECK(DanglingHeads(db, "walked") == 0);
}

// A full batch of them: the statement must stay linear in the batch (a
// form that joined two CTEs took 46 s for 1,000 tombstones, past the 10 s
// statement timeout, so the walk never got past its first batch).
TEST_CASE("a full batch of tombstones takes its walked values along") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>("batch");
  topic.Register(Immediate());
  const std::string produce =
      db.schema() + ".produce_" + std::to_string(db.TopicId("batch"));
  db.raw().Query("SELECT count(" + produce +
                 "('k' || g, 1, 0, '{\"value\": 1}'::jsonb)) FROM "
                 "generate_series(1, 1000) g");
  Janitor janitor(db.client());
  WalkPastEverything(janitor, "batch");
  REQUIRE(Count(db.raw(), db.MessageTable("batch")) == 1000);
  db.raw().Query("SELECT count(" + produce +
                 "('k' || g, 1, 0, NULL)) FROM generate_series(1, 1000) g");
  const CompactResult r = janitor.CompactLog("batch");
  CHECK(r.tombstones_expired == 1000);
  CHECK(r.deleted == 2000);
  CHECK(Count(db.raw(), db.MessageTable("batch")) == 0);
}

// What the message walk has not reached it removes itself, in its own
// bounded batches: the expiry takes only the versions below that walk, so
// a hot key's backlog does not land in one tombstone batch.
TEST_CASE(
    "an expiring tombstone leaves the versions above the message walk to it") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>("hot");
  topic.Register(Immediate());
  const std::string id = std::to_string(db.TopicId("hot"));
  const std::string produce = db.schema() + ".produce_" + id;
  db.raw().Query("SELECT count(" + produce +
                 "('hot', 1, 0, '{\"value\": 1}'::jsonb)) FROM "
                 "generate_series(1, 500) g");
  db.raw().Query("SELECT " + produce + "('hot', 1, 0, NULL)");
  // One batch of the tombstone walk alone, before any message walk.
  const auto batch =
      db.raw().Query("SELECT deleted, expired FROM " + db.schema() +
                     ".clean_tombstones(" + id + ", 0, 1000)");
  REQUIRE(batch.size() == 1);
  CHECK(batch[0][0] == "1");  // the tombstone only
  CHECK(batch[0][1] == "1");
  CHECK(Count(db.raw(), db.MessageTable("hot")) == 500);
  Janitor janitor(db.client());
  CompactUntilIdle(janitor, "hot");
  CHECK(Count(db.raw(), db.MessageTable("hot")) == 0);
}

// The expiry removes only what retention allows: a value still inside its
// retention stays until the message walk reaches it.
TEST_CASE(
    "an expiring tombstone leaves its key's values that are inside retention") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>("inside");
  TopicConfig config = Immediate();
  config.retention = 24h;
  topic.Register(config);
  auto producer = topic.RegisterProducer();
  const auto value = producer.Produce(Counter{1}, Compacted("k"));
  const auto tombstone = producer.ProduceTombstone("k");
  Janitor janitor(db.client());
  const CompactResult r = janitor.CompactLog("inside");
  CHECK(r.tombstones_expired == 1);
  CHECK(r.deleted == 1);
  CHECK_FALSE(MessageExists(db, "inside", tombstone.id));
  CHECK(MessageExists(db, "inside", value.id));
  // Once out of retention the message walk removes it: no longer a head.
  topic.Register(Immediate());
  CompactUntilIdle(janitor, "inside");
  CHECK_FALSE(MessageExists(db, "inside", value.id));
  CHECK(Count(db.raw(), db.MessageTable("inside")) == 0);
}

// A value walked while it was the head under a short retention, then
// inside a longer one: the tombstone waits until the value is out of
// retention and takes it then (expiring it at once would leave the value
// with nothing to name it).
TEST_CASE("an expiring tombstone waits for a walked value inside retention") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>("raised");
  topic.Register(Immediate());
  auto producer = topic.RegisterProducer();
  const auto value = producer.Produce(Counter{1}, Compacted("k"));
  Janitor janitor(db.client());
  WalkPastEverything(janitor, "raised");
  TopicConfig longer = Immediate();
  longer.retention = 24h;
  topic.Register(longer);
  const auto tombstone = producer.ProduceTombstone("k");
  CompactUntilIdle(janitor, "raised");
  CHECK(MessageExists(db, "raised", tombstone.id));
  CHECK(MessageExists(db, "raised", value.id));
  CHECK_FALSE(topic.Key("k").CompactionHead().has_value());
  topic.Register(Immediate());  // the value's retention is over
  CompactUntilIdle(janitor, "raised");
  CHECK(Count(db.raw(), db.MessageTable("raised")) == 0);
  CHECK(topic.Stats().total_tombstones_expired == 1);
}

// Retention kept forever keeps every version: a tombstone that expires
// takes no walked value along and waits for none (the message walk no
// longer runs, so a wait would never end, and would stop the tombstone
// walk for every key after it).
TEST_CASE("under kKeepForever an expiring tombstone waits for no value") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>("kept");
  topic.Register(Immediate());
  auto producer = topic.RegisterProducer();
  const auto value = producer.Produce(Counter{1}, Compacted("k"));
  Janitor janitor(db.client());
  WalkPastEverything(janitor, "kept");
  TopicConfig keep = Immediate();
  keep.retention = kKeepForever;
  topic.Register(keep);
  const auto tombstone = producer.ProduceTombstone("k");
  const auto other = producer.ProduceTombstone("z");
  CompactUntilIdle(janitor, "kept");
  CHECK_FALSE(MessageExists(db, "kept", tombstone.id));
  CHECK_FALSE(MessageExists(db, "kept", other.id));
  CHECK(MessageExists(db, "kept", value.id));
  CHECK(topic.Stats().total_tombstones_expired == 2);
}

// An older value the expiry cannot lock holds the tombstone back (the walk
// never waits on a row); the next pass after the lock ends takes both.
TEST_CASE("an expiring tombstone waits for its key's locked older value") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>("heldback");
  topic.Register(Immediate());
  auto producer = topic.RegisterProducer();
  const auto value = producer.Produce(Counter{1}, Compacted("k"));
  Janitor janitor(db.client());
  WalkPastEverything(janitor, "heldback");
  const auto tombstone = producer.ProduceTombstone("k");
  RawConn holder;
  holder.Query("BEGIN");
  holder.Query("SELECT 1 FROM " + db.MessageTable("heldback") +
               " WHERE id = " + std::to_string(value.id) + " FOR UPDATE");
  auto pass = CompactAsync(janitor, "heldback");
  REQUIRE(pass.wait_for(10s) == std::future_status::ready);
  const CompactResult held = pass.get();
  CHECK(held.tombstones_expired == 0);
  CHECK(held.deleted == 0);
  CHECK(MessageExists(db, "heldback", tombstone.id));
  CHECK(MessageExists(db, "heldback", value.id));
  // The walk stopped before it: neither of its positions passed it.
  CHECK(db.raw().Int("SELECT greatest(tombstone_position, "
                     "coalesce(tombstone_walked_position, 0)) FROM " +
                     db.schema() + ".log_cleaner_state WHERE topic_id = " +
                     std::to_string(db.TopicId("heldback"))) < tombstone.id);
  CHECK(Count(db.raw(), db.HeadTable("heldback"),
              "head_id = " + std::to_string(tombstone.id)) == 1);
  holder.Query("ROLLBACK");
  CompactUntilIdle(janitor, "heldback");
  CHECK(Count(db.raw(), db.MessageTable("heldback")) == 0);
  CHECK(topic.Stats().total_tombstones_expired == 1);
}

TEST_CASE("cleaner vs a producer advancing the same key, producer first") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>("pf");
  topic.Register(Immediate());
  auto producer = topic.RegisterProducer();
  const auto v1 = producer.Produce(Counter{1}, Compacted("a"));
  const auto v2 = producer.Produce(Counter{2}, Compacted("a"));
  Janitor janitor(db.client());
  Tx tx = db.client().Begin();
  const auto v3 = producer.ProduceInTx(tx, Counter{3}, Compacted("a"));
  // The producer holds the key's row and its new head is not committed: the
  // pass does not wait, keeps the committed head and never sees v3.
  auto pass = CompactAsync(janitor, "pf");
  REQUIRE(pass.wait_for(10s) == std::future_status::ready);
  CHECK(pass.get().deleted == 1);
  CHECK_FALSE(MessageExists(db, "pf", v1.id));
  CHECK(MessageExists(db, "pf", v2.id));
  tx.Commit();
  CHECK(MessageExists(db, "pf", v3.id));
  CHECK(topic.Key("a").CompactionHead()->id == v3.id);
  // Only now is v2 superseded, and the next pass removes it.
  CHECK(janitor.CompactLog("pf").deleted == 1);
  CHECK_FALSE(MessageExists(db, "pf", v2.id));
  CHECK(MessageExists(db, "pf", v3.id));
  CHECK(DanglingHeads(db, "pf") == 0);
}

TEST_CASE("cleaner vs a producer advancing the same key, cleaner first") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>("cf");
  topic.Register(Immediate());
  auto producer = topic.RegisterProducer();
  const auto v1 = producer.Produce(Counter{1}, Compacted("a"));
  const auto v2 = producer.Produce(Counter{2}, Compacted("a"));
  TriggerGate gate(db, db.MessageTable("cf"), "DELETE");
  gate.Close();
  Janitor janitor(db.client());
  // The pass has chosen what to delete (v2 was the head then) and waits.
  auto pass = CompactAsync(janitor, "cf");
  REQUIRE(testing::WaitForLockWait(db.raw(), kCleanerMarker, db.schema()));
  const auto v3 = producer.Produce(Counter{3}, Compacted("a"));
  CHECK(v3.head_advanced);
  gate.Open();
  REQUIRE(pass.wait_for(10s) == std::future_status::ready);
  CHECK(pass.get().deleted == 1);
  CHECK_FALSE(MessageExists(db, "cf", v1.id));
  CHECK(MessageExists(db, "cf", v2.id));  // the head that pass saw
  CHECK(MessageExists(db, "cf", v3.id));  // committed after its snapshot
  CHECK(DanglingHeads(db, "cf") == 0);
  CHECK(janitor.CompactLog("cf").deleted == 1);
  CHECK_FALSE(MessageExists(db, "cf", v2.id));
  CHECK(topic.Key("a").CompactionHead()->id == v3.id);
}

TEST_CASE("cleaner vs a locker on a tombstoned key, locker first") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>("lf");
  topic.Register(Immediate());
  auto producer = topic.RegisterProducer();
  producer.Produce(Counter{1}, Compacted("k"));
  const auto tombstone = producer.ProduceTombstone("k");
  Janitor janitor(db.client());
  Tx tx = db.client().Begin();
  CHECK_FALSE(topic.Key("k").LockCompactionHead(tx).has_value());
  // Skipped, not waited on.
  auto pass = CompactAsync(janitor, "lf");
  REQUIRE(pass.wait_for(10s) == std::future_status::ready);
  const CompactResult r = pass.get();
  CHECK(r.tombstones_expired == 0);
  CHECK(MessageExists(db, "lf", tombstone.id));
  // The locker revives the key: it wins.
  producer.ProduceInTx(tx, Counter{7}, Compacted("k"));
  tx.Commit();
  CompactUntilIdle(janitor, "lf");
  CHECK(topic.Key("k").CompactionHead()->message.value == 7);
  CHECK_FALSE(MessageExists(db, "lf", tombstone.id));  // superseded, removed
  CHECK(Count(db.raw(), db.MessageTable("lf")) == 1);
  CHECK(topic.Stats().total_tombstones_expired == 0);
}

TEST_CASE("cleaner vs a locker on a tombstoned key, cleaner first") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>("cl");
  topic.Register(Immediate());
  auto producer = topic.RegisterProducer();
  producer.ProduceTombstone("k");
  // Holds the expiry (head turning NULL) after the cleaner locked the row.
  TriggerGate gate(db, db.HeadTable("cl"), "UPDATE",
                   "OLD.head_id IS NOT NULL AND NEW.head_id IS NULL");
  gate.Close();
  Janitor janitor(db.client());
  auto pass = CompactAsync(janitor, "cl");
  REQUIRE(testing::WaitForLockWait(db.raw(), kCleanerMarker, db.schema()));
  auto locker = std::async(std::launch::async, [&] {
    return db.client().InTransaction([&](Tx& tx) {
      const bool had_value = topic.Key("k").LockCompactionHead(tx).has_value();
      producer.ProduceInTx(tx, Counter{8}, Compacted("k"));
      return had_value;
    });
  });
  // The locker waits for the cleaner's row lock.
  REQUIRE(testing::WaitForLockWait(db.raw(), kLockMarker, db.schema()));
  gate.Open();
  REQUIRE(pass.wait_for(10s) == std::future_status::ready);
  CHECK(pass.get().tombstones_expired == 1);
  REQUIRE(locker.wait_for(10s) == std::future_status::ready);
  CHECK_FALSE(locker.get());  // it found the row headless
  CHECK(topic.Key("k").CompactionHead()->message.value == 8);
  CHECK(DanglingHeads(db, "cl") == 0);
}

TEST_CASE(
    "cleaner vs the headless janitor on a row the cleaner turns headless") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>("cj");
  TopicConfig config = Immediate();
  config.headless_ttl = 1ms;
  topic.Register(config);
  auto producer = topic.RegisterProducer();
  producer.ProduceTombstone("k");
  TriggerGate gate(db, db.HeadTable("cj"), "UPDATE",
                   "OLD.head_id IS NOT NULL AND NEW.head_id IS NULL");
  gate.Close();
  Janitor cleaner(db.client());
  auto pass = CompactAsync(cleaner, "cj");
  REQUIRE(testing::WaitForLockWait(db.raw(), kCleanerMarker, db.schema()));
  // While the expiry is uncommitted the row has a head: nothing to sweep,
  // and the sweep does not wait on the cleaner's lock.
  Janitor janitor(db.client());
  auto sweep = std::async(std::launch::async,
                          [&] { return janitor.SweepHeadless("cj"); });
  REQUIRE(sweep.wait_for(10s) == std::future_status::ready);
  CHECK(sweep.get().deleted == 0);
  gate.Open();
  REQUIRE(pass.wait_for(10s) == std::future_status::ready);
  CHECK(pass.get().tombstones_expired == 1);
  std::this_thread::sleep_for(5ms);  // the 1 ms TTL, not an ordering
  CHECK(janitor.SweepHeadless("cj").deleted == 1);
  // A locker recreates the key as any headless key.
  db.client().InTransaction([&](Tx& tx) {
    CHECK_FALSE(topic.Key("k").LockCompactionHead(tx).has_value());
  });
  CHECK(Count(db.raw(), db.HeadTable("cj")) == 1);
  CHECK(DanglingHeads(db, "cj") == 0);
}

TEST_CASE(
    "a message committed late below the cleaner's position is removed by a "
    "later pass") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>("late");
  topic.Register(Immediate());
  auto producer = topic.RegisterProducer();
  Janitor janitor(db.client());
  // Holds its message id across passes; the ids after it commit at once,
  // and the last of them stays (a head), so the walk passes the held id.
  Tx late = db.client().Begin();
  const auto held = producer.ProduceInTx(late, Counter{1});
  for (int i = 0; i < 3; ++i) producer.Produce(Counter{i}, Compacted("a"));
  CHECK(janitor.CompactLog("late").deleted == 2);
  CHECK(janitor.CompactLog("late").deleted == 0);
  CHECK(janitor.CompactLog("late").deleted == 0);
  // Passes walked beyond the held id, but their position is not final
  // while that transaction may still commit below it.
  const auto position = [&] {
    return db.raw().Int("SELECT position FROM " + db.QuotedSchema() +
                            ".log_cleaner_state WHERE topic_id = $1",
                        {std::to_string(db.TopicId("late"))});
  };
  CHECK(position() < held.id);
  late.Commit();
  CHECK(MessageExists(db, "late", held.id));
  CHECK(janitor.CompactLog("late").deleted == 1);
  CHECK_FALSE(MessageExists(db, "late", held.id));
  CHECK(Count(db.raw(), db.MessageTable("late")) == 1);  // the head
}

TEST_CASE(
    "more late rows below the pending position than a pass can walk still "
    "let the walk move") {
  // A pass walks from the final position; the pending one turns final once
  // every transaction older than its walk has ended. Rows committed late
  // into that range make the walk longer: here 50 of them, and a pass of
  // two batches of 10 walks 10 messages (its first batch is the tombstone
  // walk's).
  // A pass that could move only to the pending position never reached it,
  // and the cleaner stopped for good.
  LiveDb db;
  auto topic = db.client().Topic<Counter>("many_late");
  topic.Register(Immediate());
  auto producer = topic.RegisterProducer();
  compaction::SweepOptions o;
  o.batch_size = 10;
  o.max_batches = 2;
  Janitor janitor(db.client());
  Tx late = db.client().Begin();
  for (int i = 0; i < 50; ++i) {  // heads: the walk passes and keeps them
    producer.ProduceInTx(late, Counter{i},
                         Compacted("late" + std::to_string(i)));
  }
  for (int i = 0; i < 5; ++i) {
    producer.Produce(Counter{i}, Compacted("early" + std::to_string(i)));
  }
  janitor.CompactLog("many_late", o);  // pending: past the 5 committed rows
  // The trigger lets no one move the final position while `late` may still
  // commit below the pending one, nor ever past the pending one.
  const std::string state = db.QuotedSchema() + ".log_cleaner_state";
  const std::string where =
      " WHERE topic_id = " + std::to_string(db.TopicId("many_late"));
  const std::int64_t pending =
      db.raw().Int("SELECT pending_position FROM " + state + where);
  for (std::int64_t forged : {pending - 1, pending + 1}) {
    INFO("position " << forged << ", pending " << pending);
    CHECK(db.raw().TryExec("UPDATE " + state + " SET position = " +
                           std::to_string(forged) + where) == "23514");
  }
  late.Commit();
  const auto superseded = producer.Produce(Counter{1}, Compacted("dup"));
  producer.Produce(Counter{2}, Compacted("dup"));
  // Tests running beside this one hold transactions of their own for a
  // moment (the pending position waits for them), so a pause between tries.
  int passes = 0;
  for (; passes < 100 && MessageExists(db, "many_late", superseded.id);
       ++passes) {
    if (!janitor.CompactLog("many_late", o).stopped_at_limit) {
      std::this_thread::sleep_for(100ms);
    }
  }
  CHECK_FALSE(MessageExists(db, "many_late", superseded.id));
  INFO("passes: " << passes);
  // Each pass: a batch of the tombstone walk (none), then 10 messages; the
  // superseded one is the 56th.
  CHECK(passes >= 6);
  CHECK(Count(db.raw(), db.MessageTable("many_late")) == 56);  // the heads
  CHECK(DanglingHeads(db, "many_late") == 0);
}

TEST_CASE(
    "bad retentions and keyless tombstones are refused before anything is "
    "written") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>("bad");
  for (auto bad : {-1ms, compaction::kMaxTtl + 1ms}) {
    TopicConfig retention;
    retention.retention = bad;
    CHECK_THROWS_AS(topic.Register(retention), compaction::InvalidArgument);
    TopicConfig tombstone;
    tombstone.tombstone_retention = bad;
    CHECK_THROWS_WITH(topic.Register(tombstone),
                      Catch::Contains("tombstone_retention"));
  }
  CHECK(db.raw().Int("SELECT count(*) FROM " + db.QuotedSchema() + ".topic") ==
        0);
  topic.Register();
  auto producer = topic.RegisterProducer();
  CHECK_THROWS_AS(producer.ProduceTombstone(""), compaction::InvalidArgument);
  CHECK(Count(db.raw(), db.MessageTable("bad")) == 0);
  // The database refuses what the library would: a keyless tombstone, an
  // update of a stored message, a retention out of bounds.
  CHECK(db.raw().TryExec("INSERT INTO " + db.MessageTable("bad") +
                         " (schema_version, payload) VALUES (1, NULL)") ==
        "23514");
  producer.Produce(Counter{1});
  CHECK(db.raw().TryExec("UPDATE " + db.MessageTable("bad") +
                         " SET payload = '{}'") == "23514");
  CHECK(db.raw().TryExec("UPDATE " + db.QuotedSchema() +
                         ".topic SET retention_ms = -1") == "23514");
  // Defaults: 7 days and 1 day; an unset field keeps what is there.
  const auto info = topic.Info();
  CHECK(info.retention == std::chrono::hours(24 * 7));
  CHECK(info.tombstone_retention == std::chrono::hours(24));
  TopicConfig set;
  set.retention = 5s;
  topic.Register(set);
  CHECK(topic.Register().retention == 5s);
  CHECK(topic.Info().tombstone_retention == std::chrono::hours(24));
}

TEST_CASE("head advances across tombstones stay HOT updates") {
  if (testing::SkipOnCitus(
          "reads n_tup_hot_upd from the coordinator's pg_stat_user_tables; the "
          "updates happen on the workers' shards"))
    return;
  LiveDb db;
  auto client = db.NewClient(1);  // one backend, so one stats flush covers all
  auto topic = client.Topic<Counter>("hot-tomb");
  topic.Register();
  auto producer = topic.RegisterProducer();
  const std::string table = db.HeadTable("hot-tomb");
  constexpr int kKeys = 5;
  constexpr int kAdvances = 40;
  for (int i = 0; i < kKeys; ++i) {
    producer.Produce(Counter{0}, Compacted("k" + std::to_string(i)));
  }
  for (int round = 1; round <= kAdvances; ++round) {
    for (int i = 0; i < kKeys; ++i) {
      const std::string key = "k" + std::to_string(i);
      if (round % 2 == 1) {
        producer.ProduceTombstone(key);
      } else {
        producer.Produce(Counter{round}, Compacted(key));
      }
    }
  }
  client.InTransaction([](Tx& tx) {
    PQclear(PQexec(tx.native_handle(), "SELECT pg_stat_force_next_flush()"));
  });
  client.InTransaction([](Tx&) {});  // one more idle transition
  std::int64_t updates = 0;
  std::int64_t hot = 0;
  const auto deadline = std::chrono::steady_clock::now() + 15s;
  while (std::chrono::steady_clock::now() < deadline) {
    auto row = db.raw().Query(
        "SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables "
        "WHERE relid = $1::regclass",
        {table});
    updates = std::stoll(*row[0][0]);
    hot = std::stoll(*row[0][1]);
    if (updates >= kKeys * kAdvances) break;
    std::this_thread::sleep_for(50ms);
  }
  REQUIRE(updates == kKeys * kAdvances);
  INFO("hot " << hot << " of " << updates);
  CHECK(hot >= updates * 95 / 100);
}

TEST_CASE(
    "stats show the log's size, its tombstoned keys and the cleaner's lag") {
  if (testing::SkipOnCitus(
          "ages messages by disabling their immutability trigger through the "
          "coordinator, which Citus refuses on a distributed table"))
    return;
  LiveDb db;
  auto topic = db.client().Topic<Counter>("st");
  TopicConfig config;
  config.retention = 1h;
  config.tombstone_retention = 1h;
  topic.Register(config);
  auto producer = topic.RegisterProducer();
  for (int i = 0; i < 50; ++i) producer.Produce(Counter{i}, Compacted("k"));
  producer.ProduceTombstone("t1");
  producer.ProduceTombstone("t2");
  db.raw().Query("ANALYZE " + db.MessageTable("st"));
  Janitor janitor(db.client());
  janitor.CompactLog("st");
  compaction::TopicStats stats = topic.Stats();
  CHECK(stats.estimated_messages == 52);
  CHECK(stats.tombstoned_keys == 2);
  CHECK(stats.cleaner_lag == 0ms);  // everything is inside its retention
  // Messages from two hours ago the cleaner has not examined: it is an
  // hour behind its cutoff.
  const std::int64_t id = db.TopicId("st");
  db.raw().Query("ALTER TABLE " + db.MessageTable("st") +
                 " DISABLE TRIGGER message_immutable");
  db.raw().Query("UPDATE " + db.MessageTable("st") +
                 " SET created_at = now() - interval '2 hours'");
  db.raw().Query("UPDATE " + db.QuotedSchema() +
                     ".log_cleaner_state SET next_created_at = now() - "
                     "interval '2 hours' WHERE topic_id = $1",
                 {std::to_string(id)});
  stats = topic.Stats();
  CHECK(stats.cleaner_lag >= 59min);
  CHECK(stats.cleaner_lag <= 61min);
  // The listing carries the same figures.
  const auto all = db.client().ListTopicStats();
  REQUIRE(all.size() == 1);
  CHECK(all[0].stats.tombstoned_keys == 2);
  CHECK(all[0].stats.cleaner_lag >= 59min);
  // A pass catches up: everything is removable now.
  janitor.CompactLog("st");
  stats = topic.Stats();
  CHECK(stats.cleaner_lag == 0ms);
  CHECK(stats.tombstoned_keys == 0);
  CHECK(stats.total_tombstones_expired == 2);
  CHECK(Count(db.raw(), db.MessageTable("st")) == 1);
}

TEST_CASE(
    "stress: lockers, producers, tombstones, the janitor and the cleaner "
    "together") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>("stress");
  TopicConfig config = Immediate();
  config.headless_ttl = 1ms;
  topic.Register(config);
  const std::vector<std::string> counters = {"c0", "c1", "c2"};
  const std::vector<std::string> doomed = {"d0", "d1"};
  std::atomic<bool> stop{false};
  std::mutex mutex;
  std::map<std::string, std::int64_t> increments;
  std::vector<std::string> failures;
  auto record_failure = [&](const std::exception& e) {
    std::lock_guard lock(mutex);
    failures.push_back(e.what());
  };
  std::vector<std::thread> threads;
  for (int locker = 0; locker < 2; ++locker) {
    threads.emplace_back([&, locker] {
      auto client = db.NewClient(1);
      auto t = client.Topic<Counter>("stress");
      auto producer = t.RegisterProducer();
      for (int i = 0; !stop; ++i) {
        const std::string& key = counters[(i + locker) % counters.size()];
        try {
          Increment(client, t.Key(key), producer);
          std::lock_guard lock(mutex);
          ++increments[key];
        } catch (const compaction::RetryableError&) {
          // The janitor at 1 ms raced the lock loop: retried next round.
        } catch (const std::exception& e) {
          record_failure(e);
          return;
        }
      }
    });
  }
  threads.emplace_back([&] {  // values, history and tombstones
    auto client = db.NewClient(1);
    auto producer = client.Topic<Counter>("stress").RegisterProducer();
    try {
      for (int i = 0; !stop; ++i) {
        const std::string& key = doomed[i % doomed.size()];
        if (i % 3 == 0) {
          producer.ProduceTombstone(key);
        } else {
          producer.Produce(Counter{i}, Compacted(key));
        }
        producer.Produce(Counter{i});  // unkeyed
        producer.Produce(Counter{i},
                         ProduceOptions{"p", std::nullopt});  // not compacted
      }
    } catch (const std::exception& e) {
      record_failure(e);
    }
  });
  threads.emplace_back([&] {  // the headless janitor
    auto client = db.NewClient(1);
    Janitor janitor(client);
    try {
      while (!stop) janitor.SweepHeadless("stress");
    } catch (const std::exception& e) {
      record_failure(e);
    }
  });
  std::atomic<int> passes{0};
  threads.emplace_back([&] {  // the cleaner
    auto client = db.NewClient(1);
    Janitor janitor(client);
    try {
      while (!stop) {
        janitor.CompactLog("stress");
        ++passes;
      }
    } catch (const std::exception& e) {
      record_failure(e);
    }
  });
  std::int64_t dangling = 0;
  const auto until = std::chrono::steady_clock::now() + 4s;
  while (std::chrono::steady_clock::now() < until) {
    dangling += DanglingHeads(db, "stress");
    std::this_thread::sleep_for(50ms);
  }
  stop = true;
  for (auto& t : threads) t.join();
  for (const auto& f : failures) FAIL_CHECK(f);
  CHECK(dangling == 0);
  CHECK(passes > 3);
  std::int64_t total = 0;
  for (const auto& key : counters) {
    INFO(key);
    const auto head = topic.Key(key).CompactionHead();
    const std::int64_t expected = increments[key];
    total += expected;
    CHECK(head.has_value() == (expected > 0));
    if (head) CHECK(head->message.value == expected);
  }
  CHECK(total > 0);
  Janitor janitor(db.client());
  CompactUntilIdle(janitor, "stress");
  CHECK(DanglingHeads(db, "stress") == 0);
  // After a final pass the log holds exactly the heads.
  CHECK(Count(db.raw(), db.MessageTable("stress")) ==
        Count(db.raw(), db.HeadTable("stress"), "head_id IS NOT NULL"));
  CHECK(Count(db.raw(), db.MessageTable("stress"), "payload IS NULL") == 0);
  INFO("cleaner passes " << passes.load() << ", increments " << total);
}

TEST_CASE("the cleaner has its own claim, separate from the sweep's") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>("claim");
  topic.Register(Immediate());
  auto producer = topic.RegisterProducer();
  producer.Produce(Counter{1});
  const std::string id = std::to_string(db.TopicId("claim"));
  db.raw().Query("UPDATE " + db.QuotedSchema() +
                     ".log_cleaner_state SET claimed_by = 'replica-b', "
                     "claimed_until = now() + interval '1 hour' "
                     "WHERE topic_id = $1",
                 {id});
  Janitor janitor(db.client());
  const CompactResult r = janitor.CompactLog("claim");
  CHECK(r.skipped);
  CHECK(r.claimed_by == "replica-b");
  CHECK(r.deleted == 0);
  CHECK(Count(db.raw(), db.MessageTable("claim")) == 1);
  // The headless sweep's claim is another row: it is not held.
  CHECK_FALSE(janitor.SweepHeadless("claim").skipped);
  db.raw().Query("UPDATE " + db.QuotedSchema() +
                     ".log_cleaner_state SET claimed_until = now() - "
                     "interval '1 second' WHERE topic_id = $1",
                 {id});
  CHECK(janitor.CompactLog("claim").deleted == 1);
}

TEST_CASE("Cancel stops a cleaner pass, its batch rolls back") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>("cancel");
  topic.Register(Immediate());
  auto producer = topic.RegisterProducer();
  for (int i = 0; i < 5; ++i) producer.Produce(Counter{i});
  TriggerGate gate(db, db.MessageTable("cancel"), "DELETE");
  gate.Close();
  Janitor janitor(db.client());
  auto pass = CompactAsync(janitor, "cancel");
  REQUIRE(testing::WaitForLockWait(db.raw(), kCleanerMarker, db.schema()));
  janitor.Cancel();
  REQUIRE(pass.wait_for(10s) == std::future_status::ready);
  const CompactResult r = pass.get();
  gate.Open();
  CHECK(r.cancelled);
  CHECK(r.deleted == 0);
  CHECK(Count(db.raw(), db.MessageTable("cancel")) == 5);
  CHECK(topic.Stats().cleaner.last_error == "cancelled");
  // The next pass does the work.
  CHECK(janitor.CompactLog("cancel").deleted == 5);
}

TEST_CASE(
    "a full pass an older open transaction keeps from moving is no backlog") {
  // Each pass walks from the final position; a pending one turns final
  // only once every older transaction has ended. Until then a pass that
  // deletes nothing walks the same rows to the same end, and a scheduler
  // that took "stopped at the limit" for a backlog repeated it at once.
  LiveDb db;
  auto topic = db.client().Topic<Counter>("held_back");
  topic.Register(Immediate());
  auto producer = topic.RegisterProducer();
  for (int i = 0; i < 60; ++i) {  // heads only: nothing to delete
    producer.Produce(Counter{i}, Compacted("k" + std::to_string(i)));
  }
  RawConn older;  // a long transaction with an xid, any role's
  older.Query("BEGIN");
  older.Query("SELECT pg_current_xact_id()");
  compaction::SweepOptions o;
  o.batch_size = 10;
  o.max_batches = 3;
  Janitor janitor(db.client());
  const CompactResult first = janitor.CompactLog("held_back", o);
  CHECK(first.deleted == 0);
  CHECK(first.stopped_at_limit);  // recorded a new pending position
  const CompactResult second = janitor.CompactLog("held_back", o);
  CHECK(second.deleted == 0);
  CHECK(second.batches == 3);
  CHECK_FALSE(second.stopped_at_limit);  // held back: nothing recorded
  older.Query("COMMIT");
  // Moving again once no older transaction is left; tests running beside
  // this one hold transactions of their own for a moment, so a few tries.
  bool moved = false;
  for (int i = 0; i < 100 && !moved; ++i) {
    moved = janitor.CompactLog("held_back", o).stopped_at_limit;
    if (!moved) std::this_thread::sleep_for(100ms);
  }
  CHECK(moved);
}
