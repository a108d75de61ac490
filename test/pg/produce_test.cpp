// Producing: the winner rule, head row lifecycle columns, plain reads.
#include <catch2/catch.hpp>
#include <thread>

#include "citus_profile.hpp"
#include "live_db.hpp"
#include "round_trips.hpp"

using compaction::CompactionOptions;
using compaction::ProduceOptions;
using compaction::RawMessage;
using compaction::Tx;
using testing::Compacted;
using testing::Counter;
using testing::LiveDb;

TEST_CASE("a compacted produce fills an existing headless row") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>("fill");
  topic.Register();
  auto producer = topic.RegisterProducer();
  const std::string table = db.HeadTable("fill");
  db.client().InTransaction(
      [&](Tx& tx) { topic.Key("k").LockCompactionHead(tx); });
  const auto created = db.raw().Value("SELECT created_at::text FROM " + table);
  const auto idle_updated =
      db.raw().Value("SELECT updated_at::text FROM " + table);

  auto produced = producer.Produce(Counter{3}, Compacted("k"));
  CHECK(produced.head_advanced);
  auto row = db.raw().Query(
      "SELECT created_at::text, head_id::text, idle_since IS NULL, "
      "updated_at::text FROM " +
      table);
  REQUIRE(row.size() == 1);
  CHECK(row[0][0] == created);
  CHECK(row[0][1] == std::to_string(produced.id));
  CHECK(row[0][2] == "t");
  CHECK(row[0][3] != idle_updated);
}

TEST_CASE("created_at never changes, updated_at changes only with the head") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>("times");
  topic.Register();
  auto producer = topic.RegisterProducer();
  const std::string table = db.HeadTable("times");
  producer.Produce(Counter{1}, Compacted("k", 10));
  auto read = [&] {
    return db.raw().Query("SELECT created_at::text, updated_at::text FROM " +
                          table)[0];
  };
  const auto first = read();
  // A losing produce (lower rank) leaves both timestamps alone.
  CHECK_FALSE(producer.Produce(Counter{2}, Compacted("k", 5)).head_advanced);
  CHECK(read() == first);
  // A plain lock of a materialized head leaves them alone too.
  db.client().InTransaction(
      [&](Tx& tx) { topic.Key("k").LockCompactionHead(tx); });
  CHECK(read() == first);
  // A winning produce moves updated_at only.
  CHECK(producer.Produce(Counter{3}, Compacted("k", 10)).head_advanced);
  const auto after = read();
  CHECK(after[0] == first[0]);
  CHECK(after[1] != first[1]);
}

TEST_CASE("the winner rule orders by schema version, then rank, then id") {
  LiveDb db;
  auto topic = db.client().Topic<RawMessage>("winner");
  topic.Register();
  auto producer = topic.RegisterProducer();
  auto key = topic.Key("k");
  auto v1 = [](int n) { return RawMessage{1, {{"n", n}}}; };

  CHECK(producer.Produce(v1(1), Compacted("k", 5)).head_advanced);
  CHECK_FALSE(
      producer.Produce(v1(2), Compacted("k", 3)).head_advanced);  // lower rank
  CHECK(key.CompactionHead()->message.payload["n"] == 1);
  CHECK(producer.Produce(v1(3), Compacted("k", 5))
            .head_advanced);  // same rank, newer id
  CHECK(key.CompactionHead()->message.payload["n"] == 3);
  CHECK(producer.Produce(RawMessage{2, {{"n", 4}}}, Compacted("k", -100))
            .head_advanced);
  CHECK_FALSE(producer.Produce(v1(5), Compacted("k", 1000))
                  .head_advanced);  // older schema
  auto head = key.CompactionHead();
  CHECK(head->message.payload["n"] == 4);
  CHECK(head->schema_version == 2);
  CHECK(head->compaction_rank == -100);
  CHECK(key.Messages(10).size() == 5);  // history keeps the losers
}

TEST_CASE("plain reads and lists skip headless rows") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>("reads");
  topic.Register();
  auto producer = topic.RegisterProducer();
  for (const char* k : {"a", "c", "e"})
    producer.Produce(Counter{1}, Compacted(k));
  db.client().InTransaction([&](Tx& tx) {
    for (const char* k : {"b", "d"}) topic.Key(k).LockCompactionHead(tx);
  });
  CHECK_FALSE(topic.Key("b").CompactionHead().has_value());
  CHECK_FALSE(topic.Key("absent").CompactionHead().has_value());
  CHECK(topic.Key("c").CompactionHead().has_value());

  auto page1 = topic.ListCompactionHeads({"", 2});
  REQUIRE(page1.size() == 2);
  CHECK(page1[0].message_key == "a");
  CHECK(page1[1].message_key == "c");
  auto page2 = topic.ListCompactionHeads({page1.back().message_key, 2});
  REQUIRE(page2.size() == 1);
  CHECK(page2[0].message_key == "e");
  CHECK(topic.ListCompactionHeads({"e", 2}).empty());
}

TEST_CASE(
    "key history is newest first and includes superseded and uncompacted "
    "messages") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>("history");
  topic.Register();
  auto producer = topic.RegisterProducer();
  producer.Produce(Counter{1}, Compacted("k"));
  producer.Produce(Counter{2},
                   ProduceOptions{"k", std::nullopt});  // history only
  producer.Produce(Counter{3}, Compacted("k"));
  producer.Produce(Counter{99}, Compacted("other"));
  producer.Produce(Counter{100}, {});  // no key at all
  auto history = topic.Key("k").Messages(10);
  REQUIRE(history.size() == 3);
  CHECK(history[0].message.value == 3);
  CHECK(history[1].message.value == 2);
  CHECK_FALSE(history[1].compaction_rank.has_value());
  CHECK(history[2].message.value == 1);
  CHECK(topic.Key("k").Messages(1).size() == 1);
  // The uncompacted message did not touch the head.
  CHECK(topic.Key("k").CompactionHead()->message.value == 3);
}

TEST_CASE("head advances on a materialized row are HOT updates") {
  if (testing::SkipOnCitus(
          "reads n_tup_hot_upd from the coordinator's pg_stat_user_tables; the "
          "updates happen on the workers' shards"))
    return;
  LiveDb db;
  auto client = db.NewClient(1);  // one backend, so one stats flush covers all
  auto topic = client.Topic<Counter>("hot");
  topic.Register();
  auto producer = topic.RegisterProducer();
  const std::string table = db.HeadTable("hot");
  constexpr int kKeys = 5;
  constexpr int kAdvances = 40;
  for (int i = 0; i < kKeys; ++i)
    producer.Produce(Counter{0}, Compacted("k" + std::to_string(i)));
  for (int round = 1; round <= kAdvances; ++round) {
    for (int i = 0; i < kKeys; ++i) {
      producer.Produce(Counter{round}, Compacted("k" + std::to_string(i)));
    }
  }
  // Ask this backend to flush its table stats when it next goes idle.
  client.InTransaction([](Tx& tx) {
    PQclear(PQexec(tx.native_handle(), "SELECT pg_stat_force_next_flush()"));
  });
  client.InTransaction([](Tx&) {});  // one more idle transition
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(15);
  std::int64_t updates = 0;
  std::int64_t hot = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    auto row = db.raw().Query(
        "SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables "
        "WHERE relid = $1::regclass",
        {table});
    updates = std::stoll(*row[0][0]);
    hot = std::stoll(*row[0][1]);
    if (updates >= kKeys * kAdvances) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  REQUIRE(updates == kKeys * kAdvances);
  INFO("hot " << hot << " of " << updates);
  CHECK(hot >= updates * 95 / 100);
}

TEST_CASE("the writer names a key's partition, held to the key's hash") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>("part");
  compaction::TopicConfig config;
  config.partitions = 5;
  topic.Register(config);
  auto producer = topic.RegisterProducer();
  for (int k = 0; k < 12; ++k) {
    const std::string key = "k" + std::to_string(k);
    producer.Produce(Counter{k}, Compacted(key));  // produce_<id>
    producer.Produce(Counter{k}, ProduceOptions{key, std::nullopt});  // plain
  }
  std::vector<compaction::Outgoing<Counter>> batch;
  for (int k = 0; k < 12; ++k) {
    const std::string key = "k" + std::to_string(k);
    batch.push_back({Counter{k}, Compacted(key, 1)});
    batch.push_back({Counter{k}, ProduceOptions{key, std::nullopt}});
    batch.push_back({Counter{k}, ProduceOptions{}});
  }
  // A key named twice: the batch draws its ids before the insert then, and
  // the unkeyed messages' partitions must still follow their ids.
  batch.push_back({Counter{100}, Compacted("k0", 2)});
  producer.ProduceBatch(batch);
  for (int i = 0; i < 7; ++i) producer.Produce(Counter{i});
  const std::string table = db.MessageTable("part");
  const std::string rule =
      "((hashtextextended(message_key, 0) % 5 + 5) % 5)::integer";
  CHECK(db.raw().Int("SELECT count(*) FROM " + table +
                     " WHERE message_key IS NOT NULL") == 49);
  CHECK(db.raw().Int("SELECT count(*) FROM " + table +
                     " WHERE message_key IS NOT NULL AND partition <> " +
                     rule) == 0);
  // Unkeyed: spread by the id the row drew (the default reads it).
  CHECK(db.raw().Int("SELECT count(*) FROM " + table +
                     " WHERE message_key IS NULL") == 19);
  CHECK(db.raw().Int("SELECT count(*) FROM " + table +
                     " WHERE message_key IS NULL AND partition <> id % 5") ==
        0);
  // Written by hand: the key's partition is accepted, any other refused.
  const std::string insert =
      "INSERT INTO " + table +
      " (message_key, schema_version, payload, partition) VALUES ";
  const int right = static_cast<int>(
      db.raw().Int("SELECT ((hashtextextended('x', 0) % 5 + 5) % 5)::integer"));
  CHECK(db.raw().TryExec(insert + "('x', 1, '{}', " + std::to_string(right) +
                         ")") == "");
  CHECK(db.raw().TryExec(insert + "('x', 1, '{}', " +
                         std::to_string((right + 1) % 5) + ")") == "23514");
  CHECK(db.raw().TryExec(insert + "(NULL, 1, '{}', 5)") == "23514");
  CHECK(db.raw().TryExec(insert + "(NULL, 1, '{}', 4)") == "");
}

TEST_CASE(
    "a topic id named again after the schema is installed anew gets SQL for "
    "its own partitions") {
  LiveDb db;
  if (testing::SkipOnCitus("drops and installs the schema; one node shows "
                           "the cache")) {
    return;
  }
  auto before = db.client().Topic<Counter>("before");
  before.Register();  // one partition
  const std::int64_t id = db.TopicId("before");
  before.RegisterProducer().Produce(Counter{1}, ProduceOptions{"k", {}});
  // The same client outlives the schema, and the id is handed out again.
  testing::InstallAgainFrom(db, id);
  auto after = db.client().Topic<Counter>("after");
  compaction::TopicConfig config;
  config.partitions = 5;
  after.Register(config);
  REQUIRE(db.TopicId("after") == id);
  // A keyed plain produce names the key's partition among the five (the
  // one-partition text would name 0 and fail the CHECK, 23514).
  for (int k = 0; k < 10; ++k) {
    CHECK_NOTHROW(after.RegisterProducer().Produce(
        Counter{k}, ProduceOptions{"k" + std::to_string(k), {}}));
  }
  CHECK(db.raw().Int("SELECT count(DISTINCT partition) FROM " +
                     db.MessageTable("after")) > 1);
}

TEST_CASE(
    "a client that outlived its schema writes and reads the topic it named, "
    "not the one registered first after the install") {
  LiveDb db;
  if (testing::SkipOnCitus("drops and installs the schema; one node shows "
                           "the cache")) {
    return;
  }
  compaction::Client client = db.NewClient(1);
  auto mine = client.Topic<Counter>("mine");
  mine.Register();
  auto producer = mine.RegisterProducer();
  producer.Produce(Counter{1}, Compacted("k"));  // caches "mine"'s id
  const std::int64_t old_id = db.TopicId("mine");
  testing::InstallAgain(db);
  db.client().Topic<Counter>("other").Register();
  db.client().Topic<Counter>("mine").Register();
  // Ids never repeat across installs: the identity starts at the clock.
  CHECK(db.TopicId("other") > old_id);
  CHECK(db.TopicId("mine") > old_id);
  // Autocommit calls of the live client: a compacted and a plain produce,
  // a head read.
  producer.Produce(Counter{2}, Compacted("k"));
  producer.Produce(Counter{3}, ProduceOptions{"plain", {}});
  CHECK(mine.Key("k").CompactionHead()->message.value == 2);
  CHECK(db.raw().Int("SELECT count(*) FROM " + db.MessageTable("other")) == 0);
  CHECK(db.raw().Int("SELECT count(*) FROM " + db.HeadTable("other")) == 0);
  CHECK(db.raw().Int("SELECT count(*) FROM " + db.MessageTable("mine")) == 2);
  // A second install in the same database starts above this one's ids.
  const std::int64_t last = db.TopicId("mine");
  testing::InstallAgain(db);
  db.client().Topic<Counter>("third").Register();
  CHECK(db.TopicId("third") > last);
}

// A transaction's first ProduceInTx carries BEGIN and the topic's look-up
// in its round trip; the look-up still decides: through a cached id that
// now names another topic's objects, the message lands in its own topic
// only.
TEST_CASE(
    "a transaction's first ProduceInTx shares one round trip with BEGIN and "
    "the look-up") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>("first");
  topic.Register();
  compaction::Client client = db.NewClient(1);
  auto topic1 = client.Topic<Counter>("first");
  topic1.Register();  // cached by the client
  auto producer = topic1.RegisterProducer();
  PGconn* conn = nullptr;
  client.InTransaction([&](Tx& tx) {
    producer.ProduceInTx(tx, Counter{0}, Compacted("warm-up"));
    producer.ProduceInTx(tx, Counter{0}, ProduceOptions{"warm-up", {}});
    conn = tx.native_handle();
  });
  CHECK(testing::RoundTrips(conn, [&] {
          client.InTransaction([&](Tx& tx) {
            producer.ProduceInTx(tx, Counter{1}, Compacted("k"));
          });
        }) == 2);
  CHECK(testing::RoundTrips(conn, [&] {
          client.InTransaction([&](Tx& tx) {
            producer.ProduceInTx(tx, Counter{2}, ProduceOptions{"k", {}});
          });
        }) == 2);
  auto head = topic.Key("k").CompactionHead();
  REQUIRE(head.has_value());
  CHECK(head->message.value == 1);
}

TEST_CASE(
    "a first ProduceInTx through a cached id that now names another topic "
    "writes only to its own topic") {
  const bool compacted = GENERATE(false, true);
  INFO("compacted " << compacted);
  LiveDb db;
  if (testing::SkipOnCitus("drops and installs the schema; one node shows "
                           "the cache")) {
    return;
  }
  auto mine = db.client().Topic<Counter>("mine");
  mine.Register();
  auto producer = mine.RegisterProducer();
  // "other" has 5 partitions: a keyed plain produce built for "mine"'s one
  // names partition 0, which "other"'s CHECK refuses for this key (23514);
  // that error says nothing of "mine" and must not reach the caller.
  testing::ReuseTopicIdElsewhere(db, "mine", "other", 5);
  const std::string key = *db.raw().Value(
      "SELECT k FROM (VALUES ('a'), ('b'), ('c'), ('d'), ('e'), ('f')) v(k) "
      "WHERE ((hashtextextended(k, 0) % 5 + 5) % 5) <> 0 ORDER BY k LIMIT 1");
  Tx tx = db.client().Begin();
  producer.ProduceInTx(tx, Counter{7},
                       compacted ? Compacted(key) : ProduceOptions{key, {}});
  tx.Commit();
  CHECK(db.raw().Int("SELECT count(*) FROM " + db.MessageTable("other")) == 0);
  CHECK(db.raw().Int("SELECT count(*) FROM " + db.HeadTable("other")) == 0);
  CHECK(db.raw().Int("SELECT count(*) FROM " + db.MessageTable("mine") +
                         " WHERE message_key = $1",
                     {key}) == 1);
}
