// Janitor::SweepHeadless against a live database: what it deletes, races with
// LockCompactionHead in both orders, batching, the claim, cancellation and
// its bookkeeping. Races force their ordering by watching pg_stat_activity
// for the waiting backend, never by sleeping.
#include <array>
#include <catch2/catch.hpp>
#include <cmath>
#include <future>
#include <iostream>
#include <mutex>
#include <random>
#include <stop_token>
#include <thread>

#include "citus_profile.hpp"
#include "db_helpers.hpp"
#include "live_db.hpp"

using compaction::CompactionOptions;
using compaction::CompactResult;
using compaction::Janitor;
using compaction::ProduceOptions;
using compaction::SweepOptions;
using compaction::SweepResult;
using compaction::TopicConfig;
using compaction::Tx;
using testing::Age;
using testing::Compacted;
using testing::Counter;
using testing::Increment;
using testing::InsertHeadless;
using testing::LiveDb;
using testing::RawConn;
using testing::TriggerGate;
using testing::WaitUntil;
using namespace std::chrono_literals;

namespace {

constexpr const char* kSweepMarker = "compaction:SweepHeadless";
constexpr const char* kLockMarker = "compaction:LockCompactionHead";
constexpr const char* kProduceMarker = "compaction:Produce";

bool Exists(RawConn& raw, const std::string& table, const std::string& key) {
  return raw.Int("SELECT count(*) FROM " + table + " WHERE message_key = $1",
                 {key}) == 1;
}

bool IsHeadless(RawConn& raw, const std::string& table,
                const std::string& key) {
  return raw.Value(
             "SELECT head_id IS NULL FROM " + table + " WHERE message_key = $1",
             {key}) == "t";
}

// Polls until `table` holds exactly `rows` rows: how a test sees that a
// sweep's batch has committed. False after `timeout`.
bool WaitForRows(RawConn& raw, const std::string& table, std::int64_t rows,
                 std::chrono::milliseconds timeout = 10s) {
  return WaitUntil(
      [&] { return raw.Int("SELECT count(*) FROM " + table) == rows; },
      timeout);
}

std::chrono::steady_clock::duration Elapsed(
    std::chrono::steady_clock::time_point since) {
  return std::chrono::steady_clock::now() - since;
}

}  // namespace

TEST_CASE("the sweep removes an expired lock-only row and keeps the rest") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>("ttl");
  topic.Register();  // default TTL: one hour
  const std::string table = db.HeadTable("ttl");
  for (const char* key : {"expired", "young", "locked"}) {
    db.client().InTransaction(
        [&](Tx& tx) { CHECK_FALSE(topic.Key(key).LockCompactionHead(tx)); });
  }
  Age(db.raw(), table, "expired");
  Age(db.raw(), table, "locked");
  // A materialized head whose last change is older than any TTL.
  topic.RegisterProducer().Produce(Counter{7}, Compacted("head"));
  db.raw().Query("UPDATE " + table +
                 " SET updated_at = '2001-01-01' WHERE message_key = 'head'");
  // Another transaction holds the expired "locked" row.
  RawConn holder;
  holder.Query("BEGIN");
  holder.Query("SELECT 1 FROM " + table +
               " WHERE message_key = 'locked' FOR UPDATE");

  Janitor janitor(db.client());
  const SweepResult r = janitor.SweepHeadless("ttl");
  holder.Query("COMMIT");

  CHECK(r.deleted == 1);
  CHECK(r.batches == 1);
  CHECK_FALSE(r.stopped_at_limit);
  CHECK_FALSE(r.skipped);
  CHECK_FALSE(r.cancelled);
  CHECK_FALSE(Exists(db.raw(), table, "expired"));
  CHECK(Exists(db.raw(), table, "young"));
  CHECK(Exists(db.raw(), table, "locked"));
  CHECK(topic.Key("head").CompactionHead()->message.value == 7);
  // Unlocked now, "locked" is still expired: the next sweep takes it.
  CHECK(janitor.SweepHeadless("ttl").deleted == 1);
  CHECK_FALSE(Exists(db.raw(), table, "locked"));
  CHECK(Exists(db.raw(), table, "young"));
}

TEST_CASE("the cutoff follows the topic's current TTL") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>("cutoff");
  topic.Register(testing::Ttl(std::chrono::hours(3)));
  const std::string table = db.HeadTable("cutoff");
  InsertHeadless(db.raw(), table, "two-hours-", 3, "2 hours");
  InsertHeadless(db.raw(), table, "four-hours-", 2, "4 hours");
  Janitor janitor(db.client());
  CHECK(janitor.SweepHeadless("cutoff").deleted == 2);
  topic.Register(testing::Ttl(std::chrono::hours(1)));  // newest TTL wins
  CHECK(janitor.SweepHeadless("cutoff").deleted == 3);
  CHECK(db.raw().Int("SELECT count(*) FROM " + table) == 0);
}

TEST_CASE("locker first: the sweep skips a held key without waiting") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>("locker-first");
  topic.Register();
  const std::string table = db.HeadTable("locker-first");
  auto key = topic.Key("k");
  db.client().InTransaction([&](Tx& tx) { key.LockCompactionHead(tx); });
  Age(db.raw(), table, "k");
  InsertHeadless(db.raw(), table, "other-", 1);

  Tx locker = db.client().Begin();
  REQUIRE_FALSE(key.LockCompactionHead(locker).has_value());
  Janitor janitor(db.client());
  SweepOptions options;
  // Had the sweep waited for the lock, this would fail it instead of
  // hanging the test.
  options.statement_timeout = 5s;
  const auto started = std::chrono::steady_clock::now();
  const SweepResult r = janitor.SweepHeadless("locker-first", options);
  CHECK(Elapsed(started) < 2s);
  CHECK(r.deleted == 1);  // other-1, not k
  CHECK(Exists(db.raw(), table, "k"));
  locker.Commit();

  REQUIRE(Exists(db.raw(), table, "k"));
  CHECK(IsHeadless(db.raw(), table, "k"));
  // The lock restarted the row's TTL: it is young now and stays.
  CHECK(janitor.SweepHeadless("locker-first").deleted == 0);
  CHECK(Exists(db.raw(), table, "k"));
}

TEST_CASE(
    "janitor first: a locker waits for the sweep, then recreates the row") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>("janitor-first");
  topic.Register();
  const std::string table = db.HeadTable("janitor-first");
  auto key = topic.Key("k");
  db.client().InTransaction([&](Tx& tx) { key.LockCompactionHead(tx); });
  Age(db.raw(), table, "k");
  const auto old_created =
      db.raw().Value("SELECT created_at::text FROM " + table);
  TriggerGate gate(db, table, "DELETE");
  gate.Close();

  Janitor janitor(db.client());
  auto sweep = std::async(std::launch::async, [&] {
    return janitor.SweepHeadless("janitor-first");
  });
  // The sweep locked k and is paused inside its DELETE.
  REQUIRE(testing::WaitForLockWait(db.raw(), kSweepMarker, db.schema()));

  auto locker = std::async(std::launch::async, [&] {
    return db.client().InTransaction(
        [&](Tx& tx) { return key.LockCompactionHead(tx).has_value(); });
  });
  // The locker's SELECT ... FOR UPDATE waits on the sweep's row lock.
  REQUIRE(testing::WaitForLockWait(db.raw(), kLockMarker, db.schema()));
  gate.Open();

  const SweepResult r = sweep.get();
  CHECK(r.deleted == 1);
  CHECK_FALSE(locker.get());  // locked the recreated row: no head
  // The row is back, headless, and new (the old created_at is gone).
  REQUIRE(Exists(db.raw(), table, "k"));
  CHECK(IsHeadless(db.raw(), table, "k"));
  CHECK(db.raw().Value("SELECT created_at > $1::timestamptz FROM " + table,
                       {old_created}) == "t");
}

// Like the locker above, but the writer is a plain autocommit Produce: its
// INSERT ... ON CONFLICT finds k's row being deleted, waits for the sweep's
// transaction, then inserts a fresh row. Had the produce taken the update
// branch on the dying row (or lost its head to the DELETE), k would have no
// head or would keep the old row's created_at.
TEST_CASE("janitor first vs a plain Produce") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>("janitor-produce");
  topic.Register();  // default TTL: one hour
  auto producer = topic.RegisterProducer();
  const std::string table = db.HeadTable("janitor-produce");
  InsertHeadless(db.raw(), table, "k-", 1, "2 hours");  // created 2 h ago
  const std::string key = "k-1";
  TriggerGate gate(db, table, "DELETE");
  gate.Close();

  Janitor janitor(db.client());
  auto sweep = std::async(std::launch::async, [&] {
    return janitor.SweepHeadless("janitor-produce");
  });
  // The sweep holds k's row lock and is paused inside its DELETE.
  REQUIRE(testing::WaitForLockWait(db.raw(), kSweepMarker, db.schema()));

  auto produce = std::async(std::launch::async, [&] {
    return producer.Produce(Counter{42}, Compacted(key));
  });
  // The produce's head upsert waits on the sweep's transaction.
  REQUIRE(testing::WaitForLockWait(db.raw(), kProduceMarker, db.schema()));
  gate.Open();

  const SweepResult r = sweep.get();
  CHECK(r.deleted == 1);
  const compaction::ProduceResult produced = produce.get();
  CHECK(produced.head_advanced);
  auto head = topic.Key(key).CompactionHead();
  REQUIRE(head.has_value());
  CHECK(head->message.value == 42);
  // A new row, born with the message (same statement timestamp), not the
  // swept row's 2 h old created_at.
  auto row = db.raw().Query(
      "SELECT h.created_at = m.created_at, h.created_at > now() - "
      "interval '1 hour', h.head_id = $2::bigint, h.idle_since IS NULL FROM " +
          table + " h JOIN " + db.MessageTable("janitor-produce") +
          " m ON m.id = h.head_id WHERE h.message_key = $1",
      {key, std::to_string(produced.id)});
  REQUIRE(row.size() == 1);
  CHECK(row[0][0] == "t");
  CHECK(row[0][1] == "t");
  CHECK(row[0][2] == "t");
  CHECK(row[0][3] == "t");
}

// The cutoff is read from the topic row by each batch's own statement: a
// TTL raised while a batch waits does not change that batch (its snapshot
// predates the change), and the next batch already uses the new one. A
// cutoff computed once per sweep would delete all three rows.
TEST_CASE("a TTL change while a sweep runs applies from the next batch") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>("ttl-change");
  topic.Register(testing::Ttl(std::chrono::hours(1)));
  const std::string table = db.HeadTable("ttl-change");
  InsertHeadless(db.raw(), table, "a-", 3, "2 hours");
  TriggerGate gate(db, table, "DELETE");
  gate.Close();

  Janitor janitor(db.client());
  SweepOptions options;
  options.batch_size = 1;
  auto sweep = std::async(std::launch::async, [&] {
    return janitor.SweepHeadless("ttl-change", options);
  });
  // The first batch picked its row under the 1 h TTL and waits.
  REQUIRE(testing::WaitForLockWait(db.raw(), kSweepMarker, db.schema()));
  auto reregister = std::async(std::launch::async, [&] {
    topic.Register(testing::Ttl(std::chrono::hours(3)));
  });
  // Registration must not wait for the batch; bounded so a regression
  // fails instead of hanging on the closed gate.
  const bool registered = reregister.wait_for(10s) == std::future_status::ready;
  gate.Open();
  REQUIRE(registered);
  reregister.get();

  const SweepResult r = sweep.get();
  CHECK(r.deleted == 1);
  CHECK(r.batches == 2);  // the second batch found nothing under 3 h
  CHECK(db.raw().Int("SELECT count(*) FROM " + table) == 2);
  CHECK(topic.Stats().janitor.total_deleted_rows == 1);
  // The rows left are younger than the new TTL: a later sweep keeps them.
  CHECK(janitor.SweepHeadless("ttl-change").deleted == 0);
}

TEST_CASE("sweeps run in bounded batches and stop at the limit") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>("batches");
  topic.Register();
  const std::string table = db.HeadTable("batches");
  Janitor janitor(db.client());
  SweepOptions options;
  options.batch_size = 1000;

  InsertHeadless(db.raw(), table, "a-", 2500);
  SweepResult r = janitor.SweepHeadless("batches", options);
  CHECK(r.batches == 3);
  CHECK(r.deleted == 2500);
  CHECK_FALSE(r.stopped_at_limit);

  InsertHeadless(db.raw(), table, "b-", 2500);
  options.max_batches = 2;
  r = janitor.SweepHeadless("batches", options);
  CHECK(r.batches == 2);
  CHECK(r.deleted == 2000);
  CHECK(r.stopped_at_limit);
  // The oldest went first; the rest waits for the next sweep.
  CHECK(db.raw().Int("SELECT count(*) FROM " + table) == 500);
  r = janitor.SweepHeadless("batches", options);
  CHECK(r.batches == 1);
  CHECK(r.deleted == 500);
  CHECK_FALSE(r.stopped_at_limit);

  // A short last batch means caught up, even at the limit.
  InsertHeadless(db.raw(), table, "c-", 1500);
  r = janitor.SweepHeadless("batches", options);
  CHECK(r.batches == 2);
  CHECK(r.deleted == 1500);
  CHECK_FALSE(r.stopped_at_limit);
}

TEST_CASE(
    "the sweep never waits on or loses a key under concurrent increments") {
  LiveDb db;
  auto client = db.NewClient(10);
  auto topic = client.Topic<Counter>("stress");
  topic.Register(testing::Ttl(1ms));
  auto producer = topic.RegisterProducer();
  const std::string table = db.HeadTable("stress");
  constexpr int kKeys = 50;
  constexpr int kThreads = 8;
  const auto deadline = std::chrono::steady_clock::now() + 3s;

  std::array<std::atomic<std::int64_t>, kKeys> increments{};
  std::atomic<std::int64_t> lock_only{0};
  std::mutex errors_mutex;
  std::vector<std::string> errors;
  auto fail = [&](const std::string& what) {
    std::lock_guard lock(errors_mutex);
    errors.push_back(what);
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(t);
      try {
        while (std::chrono::steady_clock::now() < deadline) {
          if (rng() % 4 == 0) {
            // A key locked once and never written: the janitor's prey.
            const bool had_head = client.InTransaction([&](Tx& tx) {
              return topic.Key(testing::Unique("fresh-"))
                  .LockCompactionHead(tx)
                  .has_value();
            });
            if (had_head) fail("a fresh key had a head");
            ++lock_only;
          } else {
            const int k = static_cast<int>(rng() % kKeys);
            Increment(client, topic.Key("c" + std::to_string(k)), producer);
            ++increments[k];
          }
        }
      } catch (const std::exception& e) {
        fail(std::string("locker: ") + e.what());
      }
    });
  }
  std::int64_t swept = 0;
  int sweeps = 0;
  threads.emplace_back([&] {
    Janitor janitor(client);
    SweepOptions options;
    options.batch_size = 100;
    try {
      while (std::chrono::steady_clock::now() < deadline) {
        const SweepResult r = janitor.SweepHeadless("stress", options);
        if (r.skipped) fail("a sequential sweep was skipped");
        swept += r.deleted;
        ++sweeps;
      }
    } catch (const std::exception& e) {
      fail(std::string("janitor: ") + e.what());
    }
  });
  for (auto& t : threads) t.join();

  INFO("sweeps " << sweeps << ", deleted " << swept << ", lock-only calls "
                 << lock_only.load());
  for (const auto& e : errors) UNSCOPED_INFO(e);
  REQUIRE(errors.empty());
  int written = 0;
  for (int k = 0; k < kKeys; ++k) {
    if (increments[k] == 0) continue;
    ++written;
    INFO("key c" << k);
    auto head = topic.Key("c" + std::to_string(k)).CompactionHead();
    REQUIRE(head.has_value());
    CHECK(head->message.value == increments[k]);
  }
  CHECK(db.raw().Int("SELECT count(*) FROM " + table +
                     " WHERE head_id IS NOT NULL") == written);
  CHECK(lock_only > 0);
  CHECK(swept > 0);  // the janitor really raced the lockers
}

TEST_CASE("a sweep records its outcome in janitor_state") {
  if (testing::SkipOnCitus(
          "injects a fault with a trigger created through the coordinator; "
          "Citus refuses triggers on distributed tables"))
    return;
  LiveDb db;
  auto topic = db.client().Topic<Counter>("state");
  topic.Register();
  const std::string table = db.HeadTable("state");
  Janitor janitor(db.client());

  auto fresh = topic.Stats().janitor;
  CHECK_FALSE(fresh.last_sweep_started_at);
  CHECK_FALSE(fresh.last_success_at);

  InsertHeadless(db.raw(), table, "a-", 3);
  REQUIRE(janitor.SweepHeadless("state").deleted == 3);
  const auto ok = topic.Stats().janitor;
  REQUIRE(ok.last_sweep_started_at);
  REQUIRE(ok.last_sweep_finished_at);
  REQUIRE(ok.last_success_at);
  CHECK(*ok.last_sweep_started_at <= *ok.last_sweep_finished_at);
  CHECK(*ok.last_success_at == *ok.last_sweep_finished_at);
  CHECK(ok.last_deleted_rows == 3);
  CHECK(ok.total_deleted_rows == 3);
  CHECK(ok.last_error.empty());
  CHECK(ok.claimed_by.empty());  // released

  // A failing batch: its error is recorded, the claim released, and the
  // last success stays what it was.
  db.raw().Query("CREATE FUNCTION " + db.QuotedSchema() +
                 ".boom() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
                 "RAISE EXCEPTION 'boom'; END $$");
  db.raw().Query("CREATE TRIGGER boom BEFORE DELETE ON " + table +
                 " FOR EACH ROW EXECUTE FUNCTION " + db.QuotedSchema() +
                 ".boom()");
  InsertHeadless(db.raw(), table, "b-", 2);
  try {
    janitor.SweepHeadless("state");
    FAIL("the sweep did not throw");
  } catch (const compaction::DatabaseError& e) {
    CHECK(e.sqlstate() == "P0001");
    CHECK(e.operation() == "SweepHeadless");
  }
  const auto failed = topic.Stats().janitor;
  CHECK(failed.last_error.find("boom") != std::string::npos);
  CHECK(failed.last_success_at == ok.last_success_at);
  CHECK(*failed.last_sweep_finished_at > *ok.last_sweep_finished_at);
  CHECK(failed.last_deleted_rows == 0);
  CHECK(failed.total_deleted_rows == 3);
  CHECK(db.raw().Int("SELECT count(*) FROM " + db.QuotedSchema() +
                     ".janitor_state WHERE claimed_by IS NULL AND "
                     "claimed_until IS NULL") == 1);
  CHECK(db.raw().Int("SELECT count(*) FROM " + table) == 2);

  db.raw().Query("DROP TRIGGER boom ON " + table);
  REQUIRE(janitor.SweepHeadless("state").deleted == 2);
  const auto again = topic.Stats().janitor;
  CHECK(again.last_error.empty());
  CHECK(*again.last_success_at > *ok.last_success_at);
  CHECK(again.last_deleted_rows == 2);
  CHECK(again.total_deleted_rows == 5);
}

TEST_CASE("a statement timeout bounds a batch and is recorded") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>("timeout");
  topic.Register();
  const std::string table = db.HeadTable("timeout");
  InsertHeadless(db.raw(), table, "a-", 1);
  TriggerGate gate(db, table, "DELETE");
  gate.Close();
  Janitor janitor(db.client());
  SweepOptions options;
  options.statement_timeout = 200ms;
  try {
    janitor.SweepHeadless("timeout", options);
    FAIL("the sweep did not time out");
  } catch (const compaction::DatabaseError& e) {
    CHECK(e.sqlstate() == "57014");
  }
  gate.Open();
  const auto state = topic.Stats().janitor;
  CHECK_FALSE(state.last_error.empty());
  CHECK_FALSE(state.last_success_at);
  CHECK(state.claimed_by.empty());
  CHECK(Exists(db.raw(), table, "a-1"));  // the batch rolled back
  // The connection went back to the pool clean: the next sweep works.
  CHECK(janitor.SweepHeadless("timeout").deleted == 1);
}

TEST_CASE("a second sweep of a claimed topic skips and says so") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>("claim");
  topic.Register();
  const std::string table = db.HeadTable("claim");
  InsertHeadless(db.raw(), table, "a-", 1);
  TriggerGate gate(db, table, "DELETE");
  gate.Close();

  Janitor first(db.client());
  SweepOptions a;
  a.owner = "replica-a";
  auto sweep = std::async(std::launch::async,
                          [&] { return first.SweepHeadless("claim", a); });
  REQUIRE(testing::WaitForLockWait(db.raw(), kSweepMarker, db.schema()));
  CHECK(topic.Stats().janitor.claimed_by == "replica-a");

  Janitor second(db.client());
  SweepOptions b;
  b.owner = "replica-b";
  const auto started = std::chrono::steady_clock::now();
  const SweepResult skipped = second.SweepHeadless("claim", b);
  // It neither waited for the first sweep's batch nor touched a row.
  CHECK(Elapsed(started) < 2s);
  CHECK(skipped.skipped);
  CHECK(skipped.claimed_by == "replica-a");
  CHECK(skipped.deleted == 0);
  CHECK(skipped.batches == 0);

  gate.Open();
  const SweepResult done = sweep.get();
  CHECK_FALSE(done.skipped);
  CHECK(done.deleted == 1);
  // Released: the other replica may sweep now.
  const SweepResult next = second.SweepHeadless("claim", b);
  CHECK_FALSE(next.skipped);
  CHECK(next.deleted == 0);
}

TEST_CASE("a transaction holding the janitor_state row never blocks a sweep") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>("state-locked");
  topic.Register();
  InsertHeadless(db.raw(), db.HeadTable("state-locked"), "a-", 3);
  // Any role that can read janitor_state can lock its rows, for as long as
  // it likes.
  RawConn holder;
  holder.Query("BEGIN");
  holder.Query("SELECT * FROM " + db.QuotedSchema() +
               ".janitor_state FOR UPDATE");
  Janitor janitor(db.client());
  SweepOptions o;
  o.statement_timeout = 30s;  // a wait would last this long
  const auto started = std::chrono::steady_clock::now();
  const SweepResult r = janitor.SweepHeadless("state-locked", o);
  CHECK(Elapsed(started) < 2s);
  CHECK(r.skipped);
  CHECK_THAT(r.claimed_by, Catch::Contains("janitor_state"));
  CHECK(r.deleted == 0);
  holder.Query("COMMIT");
  CHECK(janitor.SweepHeadless("state-locked", o).deleted == 3);
}

TEST_CASE("an expired claim does not block another sweep") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>("stale-claim");
  topic.Register();
  const std::string table = db.HeadTable("stale-claim");
  InsertHeadless(db.raw(), table, "a-", 4);
  // A replica died holding the claim; it lapsed a minute ago.
  db.raw().Query("UPDATE " + db.QuotedSchema() +
                 ".janitor_state SET claimed_by = 'dead', claimed_until = "
                 "now() - interval '1 minute'");
  Janitor janitor(db.client());
  const SweepResult r = janitor.SweepHeadless("stale-claim");
  CHECK_FALSE(r.skipped);
  CHECK(r.deleted == 4);
}

TEST_CASE("bad sweep input is a typed error before any write") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>("input");
  topic.Register();
  const std::string table = db.HeadTable("input");
  InsertHeadless(db.raw(), table, "a-", 2);
  Janitor janitor(db.client());
  using compaction::InvalidArgument;
  for (int bad : {0, -1}) {
    INFO(bad);
    SweepOptions o;
    o.batch_size = bad;
    CHECK_THROWS_AS(janitor.SweepHeadless("input", o), InvalidArgument);
    o = {};
    o.max_batches = bad;
    CHECK_THROWS_AS(janitor.SweepHeadless("input", o), InvalidArgument);
    o = {};
    o.statement_timeout = std::chrono::milliseconds(bad);
    CHECK_THROWS_AS(janitor.SweepHeadless("input", o), InvalidArgument);
    o = {};
    o.claim_ttl = std::chrono::milliseconds(bad);
    CHECK_THROWS_AS(janitor.SweepHeadless("input", o), InvalidArgument);
  }
  {
    SweepOptions o;
    o.batch_pause = -1ms;
    CHECK_THROWS_WITH(janitor.SweepHeadless("input", o),
                      Catch::Contains("batch_pause"));
    CHECK_THROWS_AS(janitor.SweepHeadless("input", o), InvalidArgument);
    o.batch_pause = 61s;  // beyond the one-minute bound
    o.claim_ttl = 10min;
    CHECK_THROWS_WITH(janitor.SweepHeadless("input", o),
                      Catch::Contains("batch_pause"));
    // A pause as long as the claim: the claim must outlast what it covers.
    o.batch_pause = 1s;
    o.claim_ttl = 1s;
    CHECK_THROWS_WITH(
        janitor.SweepHeadless("input", o),
        Catch::Contains("batch_pause") && Catch::Contains("claim_ttl"));
    CHECK_THROWS_AS(janitor.SweepHeadless("input", o), InvalidArgument);
  }
  {
    // A claim far beyond any real use would overflow the server's
    // timestamp arithmetic in every sweep.
    SweepOptions o;
    o.claim_ttl = std::chrono::hours(24) * 1000000000;
    CHECK_THROWS_WITH(janitor.SweepHeadless("input", o),
                      Catch::Contains("claim_ttl must be in 1.."));
  }
  for (double bad : {0.0, -0.5, 1.01, std::nan("")}) {
    SweepOptions o;
    o.duty_cycle = bad;
    CHECK_THROWS_WITH(janitor.SweepHeadless("input", o),
                      Catch::Contains("duty_cycle"));
    CHECK_THROWS_AS(janitor.SweepHeadless("input", o), InvalidArgument);
  }
  CHECK_THROWS_AS(janitor.SweepHeadless("Not A Name"), InvalidArgument);
  CHECK_THROWS_AS(janitor.SweepHeadless(""), InvalidArgument);
  CHECK_THROWS_AS(janitor.SweepHeadless("missing"), compaction::TopicNotFound);
  // Nothing was deleted or recorded.
  CHECK(db.raw().Int("SELECT count(*) FROM " + table) == 2);
  CHECK_FALSE(topic.Stats().janitor.last_sweep_started_at);
  // A destroyed topic is unknown too.
  topic.Destroy();
  CHECK_THROWS_AS(janitor.SweepHeadless("input"), compaction::TopicNotFound);
}

TEST_CASE("Janitor::Cancel stops a sweep in flight") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>("cancel");
  topic.Register();
  const std::string table = db.HeadTable("cancel");
  InsertHeadless(db.raw(), table, "a-", 3);
  TriggerGate gate(db, table, "DELETE");
  gate.Close();

  Janitor janitor(db.client());
  SweepOptions options;
  options.batch_size = 1;  // several batches to come, were it not cancelled
  auto sweep = std::async(std::launch::async, [&] {
    return janitor.SweepHeadless("cancel", options);
  });
  REQUIRE(testing::WaitForLockWait(db.raw(), kSweepMarker, db.schema()));
  const auto started = std::chrono::steady_clock::now();
  janitor.Cancel();
  const SweepResult r = sweep.get();
  CHECK(Elapsed(started) < 5s);
  gate.Open();
  CHECK(r.cancelled);
  CHECK(r.deleted == 0);  // the batch in flight rolled back
  CHECK(r.batches == 0);
  CHECK_FALSE(r.stopped_at_limit);
  CHECK(db.raw().Int("SELECT count(*) FROM " + table) == 3);
  const auto state = topic.Stats().janitor;
  CHECK(state.last_error == "cancelled");
  CHECK_FALSE(state.last_success_at);
  CHECK(state.claimed_by.empty());

  // Cancellation belonged to that sweep: the next one runs to the end.
  janitor.Cancel();  // with nothing in flight: no effect
  const SweepResult next = janitor.SweepHeadless("cancel", options);
  CHECK_FALSE(next.cancelled);
  CHECK(next.deleted == 3);
  CHECK(topic.Stats().janitor.last_error.empty());
}

TEST_CASE("a stop requested on the caller's token stops a sweep in flight") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>("stop");
  topic.Register();
  const std::string table = db.HeadTable("stop");
  InsertHeadless(db.raw(), table, "a-", 3);
  TriggerGate gate(db, table, "DELETE");
  gate.Close();

  // One source for two Janitors' sweeps, as compactiond stops all its runs.
  std::stop_source shutdown;
  Janitor janitor(db.client());
  SweepOptions options;
  options.batch_size = 1;
  auto sweep = std::async(std::launch::async, [&] {
    return janitor.SweepHeadless("stop", options, shutdown.get_token());
  });
  REQUIRE(testing::WaitForLockWait(db.raw(), kSweepMarker, db.schema()));
  const auto started = std::chrono::steady_clock::now();
  shutdown.request_stop();  // cancels the DELETE waiting on the gate
  const SweepResult r = sweep.get();
  CHECK(Elapsed(started) < 5s);
  gate.Open();
  CHECK(r.cancelled);
  CHECK(r.deleted == 0);
  CHECK(db.raw().Int("SELECT count(*) FROM " + table) == 3);
  CHECK(topic.Stats().janitor.last_error == "cancelled");

  // A token stopped before the sweep: no batch runs, nothing is deleted.
  Janitor other(db.client());
  const SweepResult late =
      other.SweepHeadless("stop", options, shutdown.get_token());
  CHECK(late.cancelled);
  CHECK(late.batches == 0);
  CHECK(db.raw().Int("SELECT count(*) FROM " + table) == 3);
  const CompactResult pass =
      other.CompactLog("stop", options, shutdown.get_token());
  CHECK(pass.cancelled);
  CHECK(pass.batches == 0);

  // A token nobody stops changes nothing.
  std::stop_source idle;
  CHECK(other.SweepHeadless("stop", options, idle.get_token()).deleted == 3);
}

TEST_CASE("a paced sweep pauses between full batches and deletes everything") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>("paced");
  topic.Register();
  const std::string table = db.HeadTable("paced");
  InsertHeadless(db.raw(), table, "a-", 2500);
  Janitor janitor(db.client());
  SweepOptions options;
  options.batch_size = 1000;
  options.batch_pause = 100ms;
  auto started = std::chrono::steady_clock::now();
  SweepResult r = janitor.SweepHeadless("paced", options);
  // Two full batches, each followed by a pause; the short third one ends it.
  CHECK(Elapsed(started) >= 200ms);
  CHECK(r.batches == 3);
  CHECK(r.deleted == 2500);
  CHECK_FALSE(r.stopped_at_limit);
  CHECK_FALSE(r.cancelled);
  CHECK_FALSE(r.lost_claim);
  CHECK(db.raw().Int("SELECT count(*) FROM " + table) == 0);
  const auto state = topic.Stats().janitor;
  CHECK(state.last_error.empty());
  CHECK(state.last_deleted_rows == 2500);
  CHECK(state.claimed_by.empty());

  // No pause after the last batch the limit allows: the sweep returns.
  InsertHeadless(db.raw(), table, "b-", 2500);
  options.max_batches = 1;
  options.batch_pause = 1min - 1ms;
  options.claim_ttl = 2min;
  started = std::chrono::steady_clock::now();
  r = janitor.SweepHeadless("paced", options);
  CHECK(Elapsed(started) < 30s);
  CHECK(r.batches == 1);
  CHECK(r.deleted == 1000);
  CHECK(r.stopped_at_limit);
}

TEST_CASE("a duty cycle pauses in proportion to how long the batch took") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>("duty");
  topic.Register();
  const std::string table = db.HeadTable("duty");
  InsertHeadless(db.raw(), table, "a-", 1500);
  // Hold the first batch's DELETE for 400 ms: that batch then takes at
  // least 400 ms, so a duty cycle of 0.2 owes a pause of at least 1.6 s.
  TriggerGate gate(db, table, "DELETE");
  gate.Close();
  Janitor janitor(db.client());
  SweepOptions options;
  options.batch_size = 1000;
  options.batch_pause = 10ms;
  options.duty_cycle = 0.2;
  auto sweep = std::async(std::launch::async, [&] {
    return janitor.SweepHeadless("duty", options);
  });
  REQUIRE(testing::WaitForLockWait(db.raw(), kSweepMarker, db.schema()));
  std::this_thread::sleep_for(400ms);
  gate.Open();
  const auto released = std::chrono::steady_clock::now();
  REQUIRE(WaitForRows(db.raw(), table, 500));
  // Early in the pause the claim is renewed to cover it (claim_ttl + pause);
  // the renewal before the batch covered only claim_ttl + batch_pause.
  const auto claim_left_ms = [&] {
    return db.raw().Int(
        "SELECT coalesce((extract(epoch FROM claimed_until - "
        "now()) * 1000)::bigint, 0) FROM " +
        db.QuotedSchema() + ".janitor_state");
  };
  CHECK(WaitUntil([&] { return claim_left_ms() > 61'000; }, 1s));
  const SweepResult r = sweep.get();
  // A fixed 10 ms pause would have let the short second batch follow at once.
  CHECK(Elapsed(released) >= 1600ms);
  CHECK(r.batches == 2);
  CHECK(r.deleted == 1500);
  CHECK_FALSE(r.cancelled);
  CHECK_FALSE(r.lost_claim);
  CHECK(topic.Stats().janitor.last_error.empty());
}

TEST_CASE("Janitor::Cancel ends a batch pause at once") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>("pause-cancel");
  topic.Register();
  const std::string table = db.HeadTable("pause-cancel");
  InsertHeadless(db.raw(), table, "a-", 3);

  Janitor janitor(db.client());
  SweepOptions options;
  options.batch_size = 1;
  options.batch_pause = 50s;  // the test would time out waiting it out
  options.claim_ttl = 60s;
  auto sweep = std::async(std::launch::async, [&] {
    return janitor.SweepHeadless("pause-cancel", options);
  });
  // The first batch committed: the sweep is in (or entering) its pause.
  REQUIRE(WaitForRows(db.raw(), table, 2));
  // The claim covers the batch and the pause after it: claim_ttl + pause
  // from the claim's start (one statement, one now()).
  CHECK(db.raw().Int("SELECT (extract(epoch FROM claimed_until - "
                     "last_sweep_started_at) * 1000)::bigint FROM " +
                     db.QuotedSchema() + ".janitor_state") == 110'000);
  const auto started = std::chrono::steady_clock::now();
  janitor.Cancel();
  REQUIRE(sweep.wait_for(5s) == std::future_status::ready);
  const SweepResult r = sweep.get();
  CHECK(Elapsed(started) < 5s);  // against a 50 s pause
  CHECK(r.cancelled);
  CHECK(r.batches == 1);
  CHECK(r.deleted == 1);  // the committed batch stays committed
  CHECK_FALSE(r.stopped_at_limit);
  CHECK(db.raw().Int("SELECT count(*) FROM " + table) == 2);
  const auto state = topic.Stats().janitor;
  CHECK(state.last_error == "cancelled");
  CHECK(state.last_deleted_rows == 1);
  CHECK(state.claimed_by.empty());

  // The cancel belonged to that sweep: the next one runs, paced, to the end.
  options.batch_pause = 10ms;
  const SweepResult next = janitor.SweepHeadless("pause-cancel", options);
  CHECK_FALSE(next.cancelled);
  CHECK(next.deleted == 2);
  CHECK(topic.Stats().janitor.last_error.empty());
}

TEST_CASE("the sweep picks rows through the idle_since index") {
  if (testing::SkipOnCitus(
          "inserts head rows behind the library's back without the partition "
          "column, which the Citus head table requires (the writer names it); "
          "and it reads the plan on the coordinator, not on the shard"))
    return;
  LiveDb db;
  auto topic = db.client().Topic<Counter>("plan");
  topic.Register();
  const std::string table = db.HeadTable("plan");
  const std::int64_t id = db.TopicId("plan");
  db.raw().Query("INSERT INTO " + table +
                 " (message_key, head_id, schema_version, compaction_rank, "
                 "created_at, updated_at, idle_since) SELECT 'm-' || g, g, 1, "
                 "0, now() - interval '1 day', now() - interval '1 day', NULL "
                 "FROM generate_series(1, 100000) g");
  InsertHeadless(db.raw(), table, "h-", 1000);
  db.raw().Query("ANALYZE " + table);
  // The statement sweep_headless runs (sql/system_v1.sql), and a sweep
  // sends its marker while paused.
  const std::string sql = *db.raw().Value(
      "SELECT " + db.QuotedSchema() + ".sweep_headless_sql($1::bigint, false)",
      {std::to_string(id)});
  TriggerGate gate(db, table, "DELETE");
  gate.Close();
  Janitor janitor(db.client());
  auto sweep = std::async(std::launch::async,
                          [&] { return janitor.SweepHeadless("plan"); });
  REQUIRE(testing::WaitForLockWait(db.raw(), kSweepMarker, db.schema()));
  gate.Open();
  CHECK(sweep.get().deleted == 1000);

  db.raw().Query("PREPARE sweep_plan(bigint, bigint) AS " + sql);
  std::string plan;
  for (const auto& row : db.raw().Query("EXPLAIN EXECUTE sweep_plan(" +
                                        std::to_string(id) + ", 1000)")) {
    plan += *row[0] + "\n";
  }
  INFO(plan);
  CHECK(plan.find("compaction_head_" + std::to_string(id) + "_idle") !=
        std::string::npos);
  CHECK(plan.find("Seq Scan on compaction_head_") == std::string::npos);
}
