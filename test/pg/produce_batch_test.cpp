// Producer::ProduceBatch: the outcome of producing one by one, bad input
// named by index, key-ordered head locks (no deadlock between batches).
#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <cmath>
#include <future>
#include <map>
#include <random>
#include <thread>
#include <vector>

#include "citus_profile.hpp"
#include "live_db.hpp"
#include "role_fixture.hpp"

using compaction::CompactionOptions;
using compaction::InvalidArgument;
using compaction::Outgoing;
using compaction::ProduceOptions;
using compaction::ProduceResult;
using compaction::RawMessage;
using compaction::Tx;
using testing::Compacted;
using testing::Counter;
using testing::LiveDb;

namespace {

std::int64_t Count(LiveDb& db, const std::string& table) {
  return db.raw().Int("SELECT count(*) FROM " + table);
}

// A key's state, as compared between two topics: its head (schema
// version, rank, payload; "tombstone" for one; none for a headless row)
// and its messages in id order (schema version, rank, payload).
std::map<std::string, std::vector<std::string>> KeyStates(
    LiveDb& db, const std::string& topic) {
  std::map<std::string, std::vector<std::string>> out;
  for (const auto& row : db.raw().Query(
           "SELECT h.message_key, coalesce(h.schema_version::text, '-') || '/' "
           "|| coalesce(h.compaction_rank::text, '-') || '/' || "
           "CASE WHEN h.head_id IS NULL THEN 'headless' WHEN m.payload IS NULL "
           "THEN 'tombstone' ELSE m.payload::text END FROM " +
           db.HeadTable(topic) + " h LEFT JOIN " + db.MessageTable(topic) +
           " m ON m.id = h.head_id ORDER BY 1")) {
    out[*row[0]].push_back("head " + *row[1]);
  }
  for (const auto& row : db.raw().Query(
           "SELECT coalesce(message_key, '<none>'), schema_version::text || "
           "'/' || coalesce(compaction_rank::text, '-') || '/' || "
           "coalesce(payload::text, 'tombstone') FROM " +
           db.MessageTable(topic) + " ORDER BY id")) {
    out[*row[0]].push_back(*row[1]);
  }
  return out;
}

Outgoing<Counter> Value(std::int64_t v, const std::string& key,
                        std::int64_t rank = 0) {
  return Outgoing<Counter>{Counter{v}, Compacted(key, rank)};
}

}  // namespace

TEST_CASE("a batch holds several versions of one key, in input order") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>("versions");
  topic.Register();
  auto producer = topic.RegisterProducer();
  const std::vector<Outgoing<Counter>> batch = {
      Value(1, "k", 5),
      Value(2, "k", 3),
      Value(3, "k", 5),
      Outgoing<Counter>{Counter{4}, ProduceOptions{}},     // keyless
      Outgoing<Counter>{std::nullopt, Compacted("t", 0)},  // a tombstone
      Value(5, "t", 0)};
  const std::vector<ProduceResult> r = producer.ProduceBatch(batch);
  REQUIRE(r.size() == batch.size());
  for (std::size_t i = 1; i < r.size(); ++i) CHECK(r[i].id > r[i - 1].id);
  CHECK(r[0].head_advanced);
  CHECK_FALSE(r[1].head_advanced);  // lower rank
  CHECK(r[2].head_advanced);        // same rank, newer id
  CHECK_FALSE(r[3].head_advanced);  // not compacted
  CHECK(r[4].head_advanced);        // the tombstone, then revived
  CHECK(r[5].head_advanced);
  CHECK(r[5].not_advanced == 1);
  CHECK(topic.Key("k").CompactionHead()->message.value == 3);
  CHECK(topic.Key("t").CompactionHead()->message.value == 5);
  CHECK(topic.Key("k").CompactionHead()->id == r[2].id);
  CHECK(Count(db, db.MessageTable("versions")) == 6);
  CHECK(Count(db, db.HeadTable("versions")) == 2);
}

TEST_CASE("a batch's outcome equals producing its messages one by one") {
  LiveDb db;
  auto batched = db.client().Topic<RawMessage>("batched");
  auto single = db.client().Topic<RawMessage>("single");
  batched.Register();
  single.Register();
  auto batch_producer = batched.RegisterProducer();
  auto single_producer = single.RegisterProducer();
  std::mt19937_64 rng(Catch::rngSeed());
  auto pick = [&](int n) {
    return static_cast<int>(std::uniform_int_distribution<int>(0, n - 1)(rng));
  };
  int value = 0;
  std::string letters = "abcdefghijklmnopqrstuvwxyz";
  for (int round = 0; round < 40; ++round) {
    // Odd rounds name each compacted key at most once (the function's
    // single-statement case) over 26 keys; even ones repeat keys over 6.
    const bool once = round % 2 == 1;
    std::shuffle(letters.begin(), letters.end(), rng);
    std::size_t next = 0;
    if (round % 3 == 0) {
      // A headless row (or a relocked head) in both topics, on a key this
      // round's batch is likely to name: a repeating round draws its keys
      // from the first six letters, a once round names the first letter
      // first.
      const std::string key(1, letters[once ? 0 : pick(6)]);
      for (auto* t : {&batched, &single}) {
        db.client().InTransaction(
            [&](Tx& tx) { t->Key(key).LockCompactionHead(tx); });
      }
    }
    std::vector<Outgoing<RawMessage>> batch(1 + pick(once ? 25 : 40));
    for (auto& e : batch) {
      const int shape = pick(10);
      e.message = RawMessage{1 + pick(2), {{"n", ++value}}};
      if (shape == 0) continue;  // keyless
      e.options.message_key =
          std::string(1, once ? letters[pick(26)] : letters[pick(6)]);
      if (shape == 1) continue;  // keyed, not compacted
      if (once) e.options.message_key = std::string(1, letters[next++]);
      e.options.compaction = CompactionOptions{pick(3) - 1};
      if (shape == 2) {
        e.message = RawMessage{1 + pick(2), nullptr, true};  // tombstone
      }
    }
    std::vector<ProduceResult> got;
    if (round % 2 == 0) {
      got = batch_producer.ProduceBatch(batch);
    } else {
      db.client().InTransaction(
          [&](Tx& tx) { got = batch_producer.ProduceBatchInTx(tx, batch); });
    }
    REQUIRE(got.size() == batch.size());
    for (std::size_t i = 0; i < batch.size(); ++i) {
      const auto& e = batch[i];
      const ProduceResult want =
          e.message->tombstone
              ? single_producer.ProduceTombstone(*e.options.message_key,
                                                 *e.options.compaction,
                                                 e.message->schema_version)
              : single_producer.Produce(*e.message, e.options);
      INFO("round " << round << ", element " << i);
      CHECK(got[i].head_advanced == want.head_advanced);
      if (i > 0) CHECK(got[i].id > got[i - 1].id);
    }
    CHECK(KeyStates(db, "batched") == KeyStates(db, "single"));
  }
  CHECK(batch_producer.ProduceBatch({}).empty());
}

TEST_CASE("a batch meets headless rows and heads it cannot beat") {
  LiveDb db;
  auto topic = db.client().Topic<RawMessage>("meets");
  topic.Register();
  auto producer = topic.RegisterProducer();
  // "h": a headless row; "k": a head at schema version 2, rank 0.
  db.client().InTransaction(
      [&](Tx& tx) { topic.Key("h").LockCompactionHead(tx); });
  const std::int64_t old_head =
      producer.Produce(RawMessage{2, {{"n", 0}}}, Compacted("k", 0)).id;
  auto at = [](int version, int n, const std::string& key,
               std::optional<std::int64_t> rank) {
    Outgoing<RawMessage> e{RawMessage{version, {{"n", n}}}, ProduceOptions{}};
    e.options.message_key = key;
    if (rank) e.options.compaction = CompactionOptions{*rank};
    return e;
  };
  std::vector<Outgoing<RawMessage>> batch = {
      at(2, 1, "k", std::nullopt),  // keyed, not compacted: never a head
      at(1, 2, "k", 9),             // an older schema version loses
      at(1, 3, "h", -5),            // fills the headless row
      at(1, 4, "h", -5),            // same rank, newer id
      at(1, 5, "h", -6),            // lower rank than the batch's own
      at(2, 6, "k", 0),             // same version and rank, newer id
      at(2, 7, "k", 0)};
  batch[4].message = RawMessage{1, nullptr, true};  // a tombstone that loses
  batch.push_back(at(3, 8, "t", 0));
  batch.push_back(at(1, 9, "t", 1));  // lower version, higher rank: loses
  batch.push_back(Outgoing<RawMessage>{RawMessage{3, nullptr, true},
                                       Compacted("t", 0)});  // wins
  const std::vector<ProduceResult> r = producer.ProduceBatch(batch);
  const std::vector<bool> want = {false, false, true, true,  false,
                                  true,  true,  true, false, true};
  REQUIRE(r.size() == want.size());
  for (std::size_t i = 0; i < r.size(); ++i) {
    INFO("element " << i);
    CHECK(r[i].head_advanced == want[i]);
    CHECK(r[i].id > old_head);
  }
  CHECK(topic.Key("k").CompactionHead()->id == r[6].id);
  CHECK(topic.Key("h").CompactionHead()->id == r[3].id);
  CHECK_FALSE(topic.Key("t").CompactionHead().has_value());  // a tombstone
  CHECK(db.raw().Int("SELECT head_id FROM " + db.HeadTable("meets") +
                     " WHERE message_key = 't'") == r[9].id);
}

TEST_CASE("bad input in a batch names its element and writes nothing") {
  LiveDb db;
  auto topic = db.client().Topic<RawMessage>("bad");
  topic.Register();
  auto producer = topic.RegisterProducer();
  auto good = [](int n) {
    return Outgoing<RawMessage>{RawMessage{1, {{"n", n}}}, Compacted("k")};
  };
  const auto check = [&](Outgoing<RawMessage> bad, const std::string& why) {
    std::vector<Outgoing<RawMessage>> batch = {good(0), good(1), good(2), bad,
                                               good(4)};
    INFO(why);
    try {
      producer.ProduceBatch(batch);
      FAIL("accepted");
    } catch (const InvalidArgument& e) {
      const std::string what = e.what();
      CHECK(what.find("ProduceBatch: element 3: ") == 0);
      CHECK(what.find(why) != std::string::npos);
    }
    db.client().InTransaction([&](Tx& tx) {
      CHECK_THROWS_AS(producer.ProduceBatchInTx(tx, batch), InvalidArgument);
    });
    CHECK(Count(db, db.MessageTable("bad")) == 0);
    CHECK(Count(db, db.HeadTable("bad")) == 0);
  };
  check({RawMessage{1, {}}, ProduceOptions{std::nullopt, CompactionOptions{}}},
        "needs a message key");
  check({RawMessage{1, nullptr, true}, ProduceOptions{"k", std::nullopt}},
        "a tombstone needs compaction");
  check({std::nullopt, Compacted("k")}, "names its schema version");
  check({RawMessage{0, {}}, Compacted("k")}, "schema_version");
  check({RawMessage{1, {}}, Compacted("")}, "key");
  check({RawMessage{1, {{"x", std::nan("")}}}, Compacted("k")}, "NaN");

  std::vector<Outgoing<RawMessage>> huge(compaction::kMaxBatchSize + 1,
                                         good(0));
  CHECK_THROWS_AS(producer.ProduceBatch(huge), InvalidArgument);
  huge.pop_back();
  CHECK(producer.ProduceBatch(huge).size() == compaction::kMaxBatchSize);
  CHECK(Count(db, db.MessageTable("bad")) ==
        static_cast<std::int64_t>(compaction::kMaxBatchSize));
}

TEST_CASE("a batch in a rolled-back transaction leaves nothing") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>("rollback");
  topic.Register();
  auto producer = topic.RegisterProducer();
  producer.Produce(Counter{1}, Compacted("old"));
  const std::vector<Outgoing<Counter>> batch = {
      Value(2, "old"), Value(3, "new"),
      Outgoing<Counter>{std::nullopt, Compacted("gone")},
      Outgoing<Counter>{Counter{4}, ProduceOptions{}}};
  struct Abandon {};
  CHECK_THROWS_AS(db.client().InTransaction([&](Tx& tx) {
    CHECK(producer.ProduceBatchInTx(tx, batch).size() == 4);
    throw Abandon{};
  }),
                  Abandon);
  CHECK(Count(db, db.MessageTable("rollback")) == 1);
  CHECK(Count(db, db.HeadTable("rollback")) == 1);  // no headless rows left
  CHECK(topic.Key("old").CompactionHead()->message.value == 1);
}

TEST_CASE("a batch takes its head rows in key order") {
  if (testing::SkipOnCitus(
          "probes the batch's locks by inserting head rows behind the "
          "library's back without the partition column, which the Citus head "
          "table requires (the writer names it)"))
    return;
  LiveDb db;
  auto topic = db.client().Topic<Counter>("order");
  topic.Register();
  auto producer = topic.RegisterProducer();
  producer.ProduceBatch(std::vector{Value(0, "a"), Value(0, "b")});
  const std::string head = db.HeadTable("order");
  // Another transaction holds "b"; the batch names c, a, b, d.
  testing::RawConn holder;
  holder.Query("BEGIN");
  holder.Query("SELECT 1 FROM " + head + " WHERE message_key = 'b' FOR UPDATE");
  auto done = std::async(std::launch::async, [&] {
    return producer.ProduceBatch(std::vector{Value(1, "c"), Value(1, "a"),
                                             Value(1, "b"), Value(1, "d")});
  });
  REQUIRE(testing::WaitForLockWait(db.raw(), "ProduceBatch", db.schema()));
  // Waiting for "b", it holds "a" (before it) and not "d" (after it); "c"
  // is after it too, though it comes first in the batch.
  testing::RawConn probe;
  probe.Query("BEGIN");
  CHECK(probe.TryExec("SELECT 1 FROM " + head +
                      " WHERE message_key = 'a' FOR UPDATE NOWAIT") == "55P03");
  probe.Query("ROLLBACK");
  // Untouched: the batch has not inserted either (an uncommitted insert
  // would make this one wait for it).
  for (const char* key : {"c", "d"}) {
    probe.Query("BEGIN");
    probe.Query("SET LOCAL lock_timeout = '200ms'");
    CHECK(probe.TryExec("INSERT INTO " + head + " (message_key) VALUES ('" +
                        key + "')") == "");
    probe.Query("ROLLBACK");
  }
  holder.Query("COMMIT");
  const auto r = done.get();
  REQUIRE(r.size() == 4);
  for (const auto& x : r) CHECK(x.head_advanced);
  CHECK(topic.Key("c").CompactionHead()->message.value == 1);
}

TEST_CASE("concurrent batches over overlapping keys never deadlock") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>("overlap");
  topic.Register();
  constexpr int kThreads = 4;
  auto client = db.NewClient(kThreads);
  std::atomic<bool> stop{false};
  std::atomic<std::int64_t> batches{0}, errors{0};
  std::vector<std::string> failures(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      auto producer = client.Topic<Counter>("overlap").RegisterProducer();
      std::mt19937_64 rng(Catch::rngSeed() + t);
      std::vector<std::string> keys;
      for (int k = 0; k < 60; ++k) keys.push_back("k" + std::to_string(k));
      for (int n = 0; !stop; ++n) {
        std::shuffle(keys.begin(), keys.end(), rng);
        // Every other batch names some of its keys twice (their rows are
        // locked by the upsert and moved by a second statement).
        const int distinct = n % 2 == 0 ? 40 : 25;
        std::vector<Outgoing<Counter>> batch;
        for (int i = 0; i < 40; ++i)
          batch.push_back(Value(i, keys[i % distinct], i % 3));
        try {
          if (t % 2 == 0) {
            producer.ProduceBatch(batch);
          } else {
            client.InTransaction(
                [&](Tx& tx) { producer.ProduceBatchInTx(tx, batch); });
          }
          ++batches;
        } catch (const std::exception& e) {
          ++errors;
          failures[t] = e.what();
        }
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::seconds(4));
  stop = true;
  for (auto& th : threads) th.join();
  for (const auto& f : failures) CHECK(f == "");
  CHECK(errors == 0);
  CHECK(batches > 8);
  // Every head names a message of its key.
  CHECK(db.raw().Int("SELECT count(*) FROM " + db.HeadTable("overlap") +
                     " h LEFT JOIN " + db.MessageTable("overlap") +
                     " m ON m.id = h.head_id AND m.message_key = h.message_key "
                     "WHERE m.id IS NULL") == 0);
}

TEST_CASE("the app role produces batches, janitor and monitor cannot",
          "[direct]") {
  testing::RoleFixture f;
  auto app = f.ClientAs("app");
  auto producer = app.Topic<Counter>("early").RegisterProducer();
  const auto r = producer.ProduceBatch(
      std::vector{Value(1, "k"), Value(2, "k"),
                  Outgoing<Counter>{std::nullopt, Compacted("x")}});
  CHECK(r[1].head_advanced);
  const std::string call = "SELECT * FROM " + f.db.QuotedSchema() +
                           ".produce_batch_" +
                           std::to_string(f.db.TopicId("early")) +
                           "('{k}', '{1}', '{9}', '{\"{}\"}', '{}')";
  for (const char* kind : {"janitor", "monitor"}) {
    testing::RawConn raw = f.RawAs(kind);
    CHECK(raw.TryExec(call) == "42501");
  }
}

TEST_CASE(
    "a batch producer that outlived Destroy and Register elsewhere works on "
    "the new topic, Destroy drops the batch function") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>("again");
  topic.Register();
  auto producer = topic.RegisterProducer();
  producer.ProduceBatch(std::vector{Value(1, "k")});
  // Another client destroys and re-creates it: this client's cache is stale.
  auto other = db.NewClient(1);
  other.Topic<Counter>("again").Destroy();
  CHECK(db.raw().Int("SELECT count(*) FROM pg_catalog.pg_proc p JOIN "
                     "pg_catalog.pg_namespace n ON n.oid = p.pronamespace "
                     "WHERE n.nspname = $1 AND p.proname LIKE 'produce%'",
                     {db.schema()}) == 0);
  other.Topic<Counter>("again").Register();
  const auto r = producer.ProduceBatch(std::vector{Value(2, "k")});
  CHECK(r[0].head_advanced);
  CHECK(topic.Key("k").CompactionHead()->message.value == 2);
  other.Topic<Counter>("again").Destroy();
  CHECK_THROWS_AS(producer.ProduceBatch(std::vector{Value(3, "k")}),
                  compaction::TopicNotFound);
  db.client().InTransaction([&](Tx& tx) {
    CHECK_THROWS_AS(producer.ProduceBatchInTx(tx, std::vector{Value(3, "k")}),
                    compaction::TopicNotFound);
  });
}

TEST_CASE("a one-partition topic's CHECK still refuses any partition but 0") {
  LiveDb db;
  db.client().Topic<Counter>("one").Register();
  const std::string insert =
      "INSERT INTO " + db.MessageTable("one") +
      " (message_key, schema_version, payload, partition) VALUES ";
  CHECK(db.raw().TryExec(insert + "('x', 1, '{}', 0)") == "");
  CHECK(db.raw().TryExec(insert + "(NULL, 1, '{}', 0)") == "");
  for (const char* bad : {"('x', 1, '{}', 1)", "('x', 1, '{}', -1)",
                          "(NULL, 1, '{}', 1)", "(NULL, 1, '{}', -1)"}) {
    INFO(bad);
    CHECK(db.raw().TryExec(insert + bad) == "23514");
  }
}

TEST_CASE("a direct batch call with a compacted message and no key fails") {
  LiveDb db;
  db.client().Topic<Counter>("nokey").Register();
  const std::string function = db.QuotedSchema() + ".produce_batch_" +
                               std::to_string(db.TopicId("nokey"));
  // As produce_<id> does: the head row cannot have a NULL key. Alone and
  // next to a key named twice (the function's two paths).
  for (const char* call :
       {"('{NULL,a}', '{1,1}', '{0,0}', '{\"{}\",\"{}\"}', '{}')",
        "('{NULL,a,a}', '{1,1,1}', '{0,0,0}', '{\"{}\",\"{}\",\"{}\"}', "
        "'{a}')",
        "('{NULL,NULL}', '{1,1}', '{0,0}', '{\"{}\",\"{}\"}', '{}')"}) {
    INFO(call);
    CHECK(db.raw().TryExec("SELECT * FROM " + function + call) == "23502");
  }
  CHECK(Count(db, db.MessageTable("nokey")) == 0);
  CHECK(Count(db, db.HeadTable("nokey")) == 0);
}

TEST_CASE(
    "a direct batch call whose list of repeated keys is wrong fails or gets "
    "the one-by-one outcome") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>("listed");
  topic.Register();
  topic.RegisterProducer().ProduceBatch(std::vector{Value(5, "old")});
  const std::string function = db.QuotedSchema() + ".produce_batch_" +
                               std::to_string(db.TopicId("listed"));
  // Each message's "advanced", in input (id) order, and how many distinct
  // ids came back.
  const auto call = [&](const std::string& args) {
    const auto rows = db.raw().Query(
        "SELECT string_agg(advanced::text, ',' ORDER BY message_id), "
        "count(DISTINCT message_id) FROM " +
        function + args);
    return *rows.at(0).at(0) + " / " + *rows.at(0).at(1);
  };
  const auto head_rank = [&](const std::string& key) {
    return db.raw().Int("SELECT compaction_rank FROM " +
                            db.HeadTable("listed") + " WHERE message_key = $1",
                        {key});
  };
  const std::string two = "'{1,1}', '{0,0}', '{\"{}\",\"{}\"}', ";
  SECTION("a key the upsert would move twice fails the call") {
    if (testing::SkipOnCitus("the coordinator finds repeated keys itself"))
      return;
    // A new key left out (inserted, then met again), an existing one left
    // out whose two messages both beat its head (moved, then met again), a
    // new key listed twice (inserted headless, then met again).
    CHECK(db.raw().TryExec("SELECT * FROM " + function + "('{a,a}', " + two +
                           "'{}')") == "21000");
    CHECK(db.raw().TryExec("SELECT * FROM " + function + "('{old,old}', " +
                           two + "NULL)") == "21000");
    CHECK(db.raw().TryExec("SELECT * FROM " + function + "('{a,b}', " + two +
                           "'{b,b}')") == "21000");
    CHECK(Count(db, db.MessageTable("listed")) == 1);
    CHECK(Count(db, db.HeadTable("listed")) == 1);
  }
  SECTION("a wrong list that passes gives the one-by-one outcome") {
    // Left out, neither message beating the head: only locked, twice.
    CHECK(call("('{old,old}', '{1,1}', '{-1,-1}', '{\"{}\",\"{}\"}', "
               "'{}')") == "false,false / 2");
    CHECK(head_rank("old") == 0);
    // Listed twice, named once: locked twice, moved once.
    CHECK(call("('{old}', '{1}', '{9}', '{\"{}\"}', '{old,old}')") ==
          "true / 1");
    CHECK(head_rank("old") == 9);
    // "old" named once and listed still beats the head; "b", not listed,
    // takes its own; "plain" is only in an uncompacted message and "ghost"
    // in none: neither gets a head.
    CHECK(call("('{old,b,plain}', '{1,1,1}', '{12,0,NULL}', "
               "'{\"{}\",\"{}\",\"{}\"}', '{old,NULL,ghost,plain}')") ==
          "true,true,false / 3");
    CHECK(head_rank("old") == 12);
    CHECK(db.raw().Int("SELECT count(*) FROM " + db.HeadTable("listed") +
                       " WHERE message_key IN ('ghost', 'plain') AND head_id "
                       "IS NOT NULL") == 0);
    // Both heads name a message of their own key.
    CHECK(db.raw().Int("SELECT count(*) FROM " + db.HeadTable("listed") +
                       " h JOIN " + db.MessageTable("listed") +
                       " m ON m.id = h.head_id AND m.message_key = "
                       "h.message_key") == 2);
  }
}
