// Topic registry and the baseline version gate.
#include <catch2/catch.hpp>
#include <future>
#include <set>

#include "live_db.hpp"

using compaction::TopicConfig;
using testing::Counter;
using testing::LiveDb;

TEST_CASE("registering is idempotent and the newest TTL wins") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>("orders");
  auto first = topic.Register();
  CHECK(first.headless_ttl == std::chrono::hours(1));  // the default
  auto again = topic.Register(testing::Ttl(std::chrono::minutes(5)));
  CHECK(again.id == first.id);
  CHECK(again.headless_ttl == std::chrono::minutes(5));
  CHECK(db.raw().Int("SELECT headless_ttl_ms FROM " + db.QuotedSchema() +
                     ".topic WHERE name = 'orders'") == 300000);
  auto topics = db.client().ListTopics();
  REQUIRE(topics.size() == 1);
  CHECK(topics[0].name == "orders");
  CHECK(db.raw().Int("SELECT count(*) FROM " + db.QuotedSchema() +
                     ".janitor_state") == 1);
}

TEST_CASE("Register() without settings keeps what an operator set") {
  LiveDb db;
  const std::string ttl_sql = "SELECT headless_ttl_ms FROM " +
                              db.QuotedSchema() + ".topic WHERE name = 'tuned'";
  // The operator (`compactiond topic register tuned --headless-ttl 30m`).
  db.NewClient(1).Topic<Counter>("tuned").Register(
      testing::Ttl(std::chrono::minutes(30)));
  // The application registers at every start, as the README shows.
  auto topic = db.client().Topic<Counter>("tuned");
  CHECK(topic.Register().headless_ttl == std::chrono::minutes(30));
  CHECK(topic.Register(TopicConfig{}).headless_ttl == std::chrono::minutes(30));
  CHECK(db.raw().Int(ttl_sql) == 1800000);
  // A set field still updates the topic.
  CHECK(topic.Register(testing::Ttl(std::chrono::minutes(5))).headless_ttl ==
        std::chrono::minutes(5));
  CHECK(db.raw().Int(ttl_sql) == 300000);
  CHECK(topic.Register().headless_ttl == std::chrono::minutes(5));
  // A new topic registered without settings gets the default.
  CHECK(db.client().Topic<Counter>("fresh").Register().headless_ttl ==
        std::chrono::hours(1));
  // A set field is validated before any write.
  CHECK_THROWS_AS(topic.Register(testing::Ttl(std::chrono::milliseconds(0))),
                  compaction::InvalidArgument);
  CHECK(db.raw().Int(ttl_sql) == 300000);
}

TEST_CASE("concurrent registrations of one topic create its tables once") {
  LiveDb db;
  std::vector<std::future<compaction::TopicInfo>> results;
  for (int i = 0; i < 4; ++i) {
    results.push_back(std::async(std::launch::async, [&] {
      return db.NewClient(1).Topic<Counter>("same").Register();
    }));
  }
  std::set<std::int64_t> ids;
  for (auto& r : results) ids.insert(r.get().id);
  CHECK(ids.size() == 1);
}

TEST_CASE("Destroy removes the topic and its tables") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>("gone");
  const auto info = topic.Register();
  topic.RegisterProducer().Produce(Counter{1},
                                   {"k", compaction::CompactionOptions{}});
  topic.Destroy();
  CHECK(db.raw().Int("SELECT count(*) FROM pg_tables WHERE schemaname = $1",
                     {db.schema()}) == 5);
  // The topic's functions went with it.
  CHECK(db.raw().Int("SELECT count(*) FROM pg_proc WHERE pronamespace = "
                     "$1::regnamespace AND proname ~ '_[0-9]+$'",
                     {db.QuotedSchema()}) == 0);
  CHECK_THROWS_AS(topic.Key("k").CompactionHead(), compaction::TopicNotFound);
  CHECK_THROWS_AS(topic.Destroy(), compaction::TopicNotFound);
  // Registered again it starts empty under a new id; cached ids are refreshed.
  const auto reborn = topic.Register();
  CHECK(reborn.id != info.id);
  CHECK_FALSE(topic.Key("k").CompactionHead().has_value());
}

TEST_CASE(
    "a plain read notices a topic destroyed and re-created by another client") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>("swap");
  topic.Register();
  CHECK_FALSE(topic.Key("k").CompactionHead().has_value());  // caches the id
  auto other = db.NewClient(1).Topic<Counter>("swap");
  other.Destroy();
  other.Register();
  other.RegisterProducer().Produce(Counter{7},
                                   {"k", compaction::CompactionOptions{}});
  CHECK(topic.Key("k").CompactionHead()->message.value == 7);
}

TEST_CASE(
    "an autocommit compacted Produce notices its topic destroyed and "
    "re-created by another client") {
  // It calls the topic's function produce_<id>: with the topic gone the
  // error is undefined_function, not undefined_table, and the cached id
  // used to be kept, so every later Produce failed the same way.
  LiveDb db;
  auto topic = db.client().Topic<Counter>("swap");
  topic.Register();
  auto producer = topic.RegisterProducer();
  producer.Produce(Counter{1}, {"k", compaction::CompactionOptions{}});
  auto other = db.NewClient(1).Topic<Counter>("swap");
  other.Destroy();
  CHECK_THROWS_AS(
      producer.Produce(Counter{2}, {"k", compaction::CompactionOptions{}}),
      compaction::TopicNotFound);
  other.Register();
  for (std::int64_t v : {3, 4}) {
    const auto r =
        producer.Produce(Counter{v}, {"k", compaction::CompactionOptions{}});
    CHECK(r.head_advanced);
  }
  CHECK(other.Key("k").CompactionHead()->message.value == 4);
  CHECK(db.raw().Int("SELECT count(*) FROM " + db.QuotedSchema() + ".message_" +
                     std::to_string(db.TopicId("swap"))) == 2);
}

TEST_CASE("InstallSchema is idempotent and concurrent installs succeed") {
  LiveDb db;
  db.client().InstallSchema();
  db.client().InstallSchema();
  CHECK(db.raw().Int("SELECT count(*) FROM " + db.QuotedSchema() +
                     ".schema_version") == 1);

  compaction::ClientOptions options;
  options.schema = testing::Unique("fresh_");
  std::vector<std::future<void>> installs;
  for (int i = 0; i < 4; ++i) {
    installs.push_back(std::async(std::launch::async, [&] {
      compaction::Client::Connect("", options).InstallSchema();
    }));
  }
  for (auto& f : installs) CHECK_NOTHROW(f.get());
  db.raw().Query("DROP SCHEMA \"" + options.schema + "\" CASCADE");
}

TEST_CASE(
    "a database at another baseline version is refused with a clear error") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>("versioned");
  topic.Register();
  const std::int64_t id = db.TopicId("versioned");

  db.raw().Query("UPDATE " + db.QuotedSchema() +
                     ".schema_version SET version = 2 WHERE topic_id = $1",
                 {std::to_string(id)});
  CHECK_THROWS_MATCHES(
      db.client().InTransaction(
          [&](compaction::Tx& tx) { topic.Key("k").LockCompactionHead(tx); }),
      compaction::SchemaVersionMismatch,
      Catch::Matchers::Predicate<compaction::SchemaVersionMismatch>(
          [](const auto& e) { return e.found() == 2 && e.expected() == 1; },
          "found 2, expected 1"));
  CHECK_THROWS_AS(topic.Register(), compaction::SchemaVersionMismatch);

  db.raw().Query("UPDATE " + db.QuotedSchema() +
                 ".schema_version SET version = 9 WHERE topic_id IS NULL");
  CHECK_THROWS_WITH(db.NewClient(), Catch::Contains("version 9") &&
                                        Catch::Contains("expects version 1"));
  CHECK_THROWS_AS(db.client().InstallSchema(),
                  compaction::SchemaVersionMismatch);
}

namespace {
// A SchemaVersionMismatch that says another build created the database.
auto SaysRecreate() {
  return Catch::Matchers::Predicate<compaction::SchemaVersionMismatch>(
      [](const compaction::SchemaVersionMismatch& e) {
        const std::string what = e.what();
        return e.found() == 1 && e.expected() == 1 &&
               what.find("another build") != std::string::npos &&
               what.find("recreate the database") != std::string::npos;
      },
      "says another build created it and to recreate the database");
}
}  // namespace

TEST_CASE(
    "a system baseline from another build of the same version is refused") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>("fp");
  topic.Register();
  db.raw().Query("UPDATE " + db.QuotedSchema() +
                 ".schema_version SET fingerprint = 'another build' WHERE "
                 "topic_id IS NULL");
  CHECK_THROWS_MATCHES(db.NewClient(), compaction::SchemaVersionMismatch,
                       SaysRecreate());
  CHECK_THROWS_MATCHES(db.client().InstallSchema(),
                       compaction::SchemaVersionMismatch, SaysRecreate());
  CHECK_THROWS_MATCHES(topic.Register(), compaction::SchemaVersionMismatch,
                       SaysRecreate());
  CHECK_THROWS_MATCHES(db.client().Topic<Counter>("new").Register(),
                       compaction::SchemaVersionMismatch, SaysRecreate());
  CHECK(db.raw().Int("SELECT count(*) FROM " + db.QuotedSchema() + ".topic") ==
        1);
}

TEST_CASE(
    "a schema recorded for the Citus profile is refused on one PostgreSQL") {
  LiveDb db;
  db.raw().Query("UPDATE " + db.QuotedSchema() +
                 ".schema_version SET profile = 'citus' WHERE topic_id IS "
                 "NULL");
  auto says_profiles =
      Catch::Matchers::Predicate<std::string>([](const std::string& what) {
        return what.find("installed for a Citus cluster") !=
                   std::string::npos &&
               what.find("has no citus extension") != std::string::npos;
      });
  try {
    db.NewClient();
    FAIL("no SchemaProfileMismatch");
  } catch (const compaction::SchemaProfileMismatch& e) {
    CHECK(e.installed_profile() == "citus");
    CHECK(e.database_profile() == "single");
    CHECK_THAT(std::string(e.what()), says_profiles);
  }
  CHECK_THROWS_AS(db.client().InstallSchema(),
                  compaction::SchemaProfileMismatch);
}

TEST_CASE(
    "a database from a build before fingerprints is refused, not a raw SQL "
    "error") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>("old");
  topic.Register();
  auto reader = db.NewClient(1);
  // One that has the topic cached: its next transaction sends the look-up
  // that names the column with its first lock (RunWithLookup).
  auto cached = db.NewClient(1);
  cached.InTransaction([&](compaction::Tx& tx) {
    cached.Topic<Counter>("old").Key("k").LockCompactionHead(tx);
  });
  db.raw().Query("ALTER TABLE " + db.QuotedSchema() +
                 ".schema_version DROP COLUMN fingerprint");
  CHECK_THROWS_MATCHES(db.NewClient(), compaction::SchemaVersionMismatch,
                       SaysRecreate());
  CHECK_THROWS_MATCHES(db.client().InstallSchema(),
                       compaction::SchemaVersionMismatch, SaysRecreate());
  // A client connected before resolves the topic: the same error, and the
  // caller's transaction survives it.
  CHECK_THROWS_MATCHES(reader.Topic<Counter>("old").Key("k").CompactionHead(),
                       compaction::SchemaVersionMismatch, SaysRecreate());
  // Twice in one transaction: the first refusal left it usable.
  auto two_locks_refused = [](compaction::Client& client) {
    client.InTransaction([&](compaction::Tx& tx) {
      for (int i = 0; i < 2; ++i) {
        CHECK_THROWS_MATCHES(
            client.Topic<Counter>("old").Key("k").LockCompactionHead(tx),
            compaction::SchemaVersionMismatch, SaysRecreate());
      }
    });
  };
  two_locks_refused(reader);
  // The pipelined look-up fails on the missing column; the transaction it
  // began is rolled back and the long way says the same.
  two_locks_refused(cached);
}

TEST_CASE("a topic created from another build's baseline is refused") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>("fp-topic");
  topic.Register();
  const std::string id = std::to_string(db.TopicId("fp-topic"));
  auto reader = db.NewClient(1);
  db.raw().Query(
      "UPDATE " + db.QuotedSchema() +
          ".schema_version SET fingerprint = 'other' WHERE topic_id = $1",
      {id});
  CHECK_THROWS_MATCHES(topic.Register(), compaction::SchemaVersionMismatch,
                       SaysRecreate());
  CHECK_THROWS_MATCHES(
      reader.Topic<Counter>("fp-topic").Key("k").CompactionHead(),
      compaction::SchemaVersionMismatch, SaysRecreate());
  CHECK_THROWS_MATCHES(reader.Topic<Counter>("fp-topic").RegisterProducer(),
                       compaction::SchemaVersionMismatch, SaysRecreate());
  CHECK_THROWS_MATCHES(db.NewClient().InTransaction([&](compaction::Tx& tx) {
    db.client().Topic<Counter>("fp-topic").Key("k").LockCompactionHead(tx);
  }),
                       compaction::SchemaVersionMismatch, SaysRecreate());
  // A fingerprint typed in by hand is shown shortened, without control
  // characters.
  db.raw().Query("UPDATE " + db.QuotedSchema() +
                     ".schema_version SET fingerprint = $2 "
                     "WHERE topic_id = $1",
                 {id, std::string(200, 'x') + "\n"});
  try {
    topic.Register();
    FAIL("no SchemaVersionMismatch");
  } catch (const compaction::SchemaVersionMismatch& e) {
    const std::string what = e.what();
    CHECK(what.size() < 400);
    CHECK(what.find('\n') == std::string::npos);
  }
}

TEST_CASE("an uninstalled schema is reported, not a raw SQL error") {
  compaction::ClientOptions options;
  options.schema = testing::Unique("never_");
  auto client = compaction::Client::Connect("", options);
  CHECK_THROWS_WITH(client.Topic<Counter>("t").Key("k").CompactionHead(),
                    Catch::Contains("not installed"));
}

TEST_CASE("listing topics of an uninstalled schema says it is not installed") {
  compaction::ClientOptions options;
  options.schema = testing::Unique("never_");
  auto client = compaction::Client::Connect("", options);
  CHECK_THROWS_AS(client.ListTopics(), compaction::SchemaVersionMismatch);
  CHECK_THROWS_AS(client.ListTopicStats(), compaction::SchemaVersionMismatch);
}

namespace {
// The SQLSTATE and primary message of a statement the server refuses.
std::pair<std::string, std::string> Refusal(testing::RawConn& raw,
                                            const std::string& sql) {
  PGresult* r = PQexec(raw.get(), sql.c_str());
  auto field = [&](int code) {
    const char* v = PQresultErrorField(r, code);
    return std::string(v == nullptr ? "" : v);
  };
  auto out =
      std::make_pair(field(PG_DIAG_SQLSTATE), field(PG_DIAG_MESSAGE_PRIMARY));
  PQclear(r);
  return out;
}
}  // namespace

TEST_CASE("a head row's created_at is immutable, for a superuser too") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>("born");
  topic.Register();
  auto producer = topic.RegisterProducer();
  producer.Produce(Counter{1}, testing::Compacted("k", 1));
  db.client().InTransaction(
      [&](compaction::Tx& tx) { topic.Key("idle").LockCompactionHead(tx); });
  const std::string table = db.HeadTable("born");
  const std::string created =
      "SELECT created_at::text FROM " + table + " WHERE message_key = $1";
  const auto k_created = db.raw().Value(created, {"k"});
  const auto idle_created = db.raw().Value(created, {"idle"});

  // db.raw() is the cluster's superuser.
  for (const std::string& sql : std::vector<std::string>{
           "UPDATE " + table + " SET created_at = now() - interval '1 day'",
           "UPDATE " + table +
               " SET created_at = created_at + interval '1 microsecond' "
               "WHERE message_key = 'idle'",
           "INSERT INTO " + table +
               " AS h (message_key, created_at, updated_at, idle_since) "
               "VALUES ('k', now(), now(), now()) ON CONFLICT ON CONSTRAINT " +
               "compaction_head_" + std::to_string(db.TopicId("born")) +
               "_pkey DO UPDATE SET created_at = excluded.created_at"}) {
    INFO(sql);
    const auto [state, message] = Refusal(db.raw(), sql);
    CHECK(state == "23514");
    CHECK_THAT(message, Catch::Contains("created_at of") &&
                            Catch::Contains("is immutable"));
  }
  // A hostile search_path cannot turn the check off: an "=" that says every
  // two timestamps are equal, ahead of pg_catalog.
  const std::string evil = "\"" + db.schema() + "_evil\"";
  db.raw().Query("CREATE SCHEMA " + evil);
  db.raw().Query("CREATE FUNCTION " + evil +
                 ".eq(timestamptz, timestamptz) RETURNS boolean "
                 "LANGUAGE sql AS 'SELECT true'");
  db.raw().Query("CREATE OPERATOR " + evil +
                 ".= (LEFTARG = timestamptz, "
                 "RIGHTARG = timestamptz, FUNCTION = " +
                 evil + ".eq)");
  db.raw().Query("SET search_path = " + evil + ", pg_catalog");
  CHECK(Refusal(db.raw(), "UPDATE " + table + " SET created_at = '2001-01-01'")
            .first == "23514");
  db.raw().Query("RESET search_path");
  db.raw().Query("DROP SCHEMA " + evil + " CASCADE");

  // Setting it to what it is changes nothing and is allowed.
  CHECK(db.raw()
            .TryExec("UPDATE " + table + " SET created_at = created_at")
            .empty());
  // A head advance, a relock of the headless row and a first head on it work.
  CHECK(producer.Produce(Counter{2}, testing::Compacted("k", 2)).head_advanced);
  db.client().InTransaction([&](compaction::Tx& tx) {
    CHECK_FALSE(topic.Key("idle").LockCompactionHead(tx).has_value());
  });
  CHECK(producer.Produce(Counter{3}, testing::Compacted("idle", 1))
            .head_advanced);
  CHECK(topic.Key("k").CompactionHead()->message.value == 2);
  CHECK(topic.Key("idle").CompactionHead()->message.value == 3);
  CHECK(db.raw().Value(created, {"k"}) == k_created);
  CHECK(db.raw().Value(created, {"idle"}) == idle_created);
}

TEST_CASE("a topic row typed in by hand is held to the library's rules") {
  LiveDb db;
  const std::string insert = "INSERT INTO " + db.QuotedSchema() +
                             ".topic (name, headless_ttl_ms) VALUES ";
  for (const std::string& values : std::vector<std::string>{
           "('Upper', 1000)", "('', 1000)", "('-lead', 1000)",
           "('.lead', 1000)", "('with space', 1000)", "('semi;colon', 1000)",
           "('" + std::string(101, 'a') + "', 1000)", "('caf\u00e9', 1000)",
           "('ok', 0)", "('ok', -1)", "('ok', 3153600000001)"}) {
    INFO(values);
    CHECK(db.raw().TryExec(insert + values) == "23514");
  }
  for (const std::string& values :
       std::vector<std::string>{"('" + std::string(100, 'a') + "', 1)",
                                "('0.a_b-c', 3153600000000)"}) {
    INFO(values);
    CHECK(db.raw().TryExec(insert + values) == "");
  }
}

TEST_CASE(
    "Destroy behind a long transaction fails with LockTimeout instead of "
    "hanging") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>("busy");
  topic.Register();
  testing::RawConn reader;
  reader.Query("BEGIN");
  reader.Query("SELECT count(*) FROM " +
               db.MessageTable("busy"));  // holds ACCESS SHARE
  const auto started = std::chrono::steady_clock::now();
  CHECK_THROWS_AS(topic.Destroy(), compaction::LockTimeout);
  const auto waited = std::chrono::steady_clock::now() - started;
  CHECK(waited >= std::chrono::seconds(4));
  CHECK(waited < std::chrono::seconds(30));
  // Nothing was destroyed, and the client's connection is usable.
  CHECK(db.client().ListTopics().size() == 1);
  reader.Query("COMMIT");
  CHECK_NOTHROW(topic.Destroy());
  CHECK(db.client().ListTopics().empty());
}
