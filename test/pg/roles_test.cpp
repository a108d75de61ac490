// The shipped least-privilege roles (sql/roles_v1.sql) and installation
// into a schema a DBA created: each role does its job through the library
// and is refused (42501) what it must not do.
//
// Roles are cluster-wide: they are named after the test's own schema
// (t_<pid>_<n>_owner, ...) and dropped at the end of each test.
#include <libpq-fe.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <functional>
#include <future>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "citus_profile.hpp"
#include "live_db.hpp"
#include "role_fixture.hpp"

using testing::Counter;
using testing::LiveDb;
using testing::RawConn;

using testing::RoleFixture;
using testing::SqlStateOf;

namespace {
constexpr std::string_view kInsufficientPrivilege = "42501";
}  // namespace

TEST_CASE("roles: everything in the schema belongs to the owner role") {
  RoleFixture f;
  auto app = f.ClientAs("app");
  app.Topic<Counter>("late").Register();
  const std::string owner = f.db.schema() + "_owner";
  CHECK(f.db.raw().Value("SELECT nspowner::regrole::text FROM pg_namespace "
                         "WHERE nspname = $1",
                         {f.db.schema()}) == owner);
  // 4 system tables and 2 per topic, "early" and "late"; indexes and
  // identity sequences follow their tables.
  CHECK(f.db.raw().Int("SELECT count(*) FROM pg_class c JOIN pg_namespace n "
                       "ON n.oid = c.relnamespace WHERE n.nspname = $1 AND "
                       "c.relowner = $2::regrole",
                       {f.db.schema(), owner}) ==
        f.db.raw().Int("SELECT count(*) FROM pg_class c JOIN pg_namespace n "
                       "ON n.oid = c.relnamespace WHERE n.nspname = $1",
                       {f.db.schema()}));
  CHECK(f.db.raw().Int("SELECT count(*) FROM pg_tables WHERE schemaname = $1 "
                       "AND tableowner = $2",
                       {f.db.schema(), owner}) == 9);
  // register_topic runs as the owner, with a pinned search_path.
  auto fn = f.db.raw().Query(
      "SELECT p.proowner::regrole::text, p.prosecdef, p.proconfig::text "
      "FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace "
      "WHERE n.nspname = $1 AND p.proname = 'register_topic'",
      {f.db.schema()});
  REQUIRE(fn.size() == 1);
  CHECK(fn[0][0] == owner);
  CHECK(fn[0][1] == "t");
  CHECK(fn[0][2] == "{\"search_path=pg_catalog, pg_temp\"}");
  // Running it again changes nothing and fails nothing.
  CHECK_NOTHROW(f.db.client().InstallRoles(""));
}

TEST_CASE("roles: the application role reads, locks, produces and registers") {
  RoleFixture f;
  auto app = f.ClientAs("app");
  // A new topic, registered without any DDL privilege.
  auto topic = app.Topic<Counter>("fresh");
  const auto info = topic.Register();
  CHECK(info.name == "fresh");
  // Registering again with the settings it has (or none) is the normal
  // start of an application; changing them is the owner's (privilege_test).
  CHECK(topic.Register(testing::Ttl(info.headless_ttl)).headless_ttl ==
        info.headless_ttl);
  CHECK(app.Topic<Counter>("set")
            .Register(testing::Ttl(std::chrono::minutes(5)))
            .headless_ttl == std::chrono::minutes(5));
  for (const char* name : {"fresh", "early"}) {
    INFO(name);
    auto t = app.Topic<Counter>(name);
    auto producer = t.RegisterProducer();
    producer.Produce(Counter{1}, testing::Compacted("k"));
    CHECK(testing::Increment(app, t.Key("k"), producer) == 2);
    // Seen with a head now: this lock is the role's own SELECT .. FOR
    // UPDATE of the row (doc/architecture.md).
    CHECK(testing::Increment(app, t.Key("k"), producer) == 3);
    CHECK(t.Key("k").CompactionHead()->message.value == 3);
    CHECK(t.Key("k").Messages(10).size() == 3);
    // A key with no head yet: the lock inserts a headless row.
    app.InTransaction([&](compaction::Tx& tx) {
      CHECK_FALSE(t.Key("new").LockCompactionHead(tx).has_value());
    });
    CHECK(t.ListCompactionHeads().size() == 1);
    CHECK(t.Stats().headless_rows == 1);
  }

  {
    // Once a topic's unhinted keys have mostly been new, the lock sends its
    // insert first (doc/architecture.md; lock_test shows the switch): the
    // role's own INSERT .. ON CONFLICT DO UPDATE, in each state of the key.
    auto t = app.Topic<Counter>("inserts");
    t.Register();
    auto producer = t.RegisterProducer();
    producer.Produce(Counter{9}, testing::Compacted("head"));
    for (int i = 0; i < 32; ++i) {
      app.InTransaction([&](compaction::Tx& tx) {
        CHECK_FALSE(t.Key("new" + std::to_string(i)).LockCompactionHead(tx));
      });
    }
    app.InTransaction([&](compaction::Tx& tx) {
      CHECK_FALSE(t.Key("newer").LockCompactionHead(tx));
      CHECK_FALSE(t.Key("new0").LockCompactionHead(tx));  // headless
      CHECK(t.Key("head").LockCompactionHead(tx)->message.value == 9);
    });
    CHECK(t.Stats().headless_rows == 33);
  }

  // It consumes: creates, locks and moves its positions.
  {
    auto consumer = topic.Consumer("reader");
    CHECK(
        app.InTransaction([&](compaction::Tx& tx) { return consumer.Poll(tx); })
            .size() == 3);
    CHECK_FALSE(consumer.Wait(std::chrono::milliseconds(0)));
  }
  // The cleaner (janitor role) reads what it needs to wait for consumers.
  auto janitor_client = f.ClientAs("janitor");
  CHECK_NOTHROW(compaction::Janitor(janitor_client).CompactLog("fresh"));
  CHECK(RawConn("user=" + f.Login("monitor"))
            .TryExec("SELECT * FROM " + f.db.QuotedSchema() +
                     ".consumer_position") == "");

  RawConn raw("user=" + f.Login("app"));
  const std::string message = f.db.MessageTable("fresh");
  const std::string head = f.db.HeadTable("fresh");
  const std::string schema = f.db.QuotedSchema();
  for (const std::string& sql :
       {"UPDATE " + schema + ".consumer_position SET consumer = 'other'",
        "UPDATE " + schema + ".consumer_position SET partition = 1",
        "DELETE FROM " + schema + ".consumer_position", "DROP TABLE " + message,
        "DROP TABLE " + head, "TRUNCATE " + message, "TRUNCATE " + head,
        "DELETE FROM " + message, "DELETE FROM " + head,
        "UPDATE " + head + " SET message_key = 'other'",
        "UPDATE " + head + " SET created_at = now()",
        "ALTER TABLE " + head + " DROP CONSTRAINT " + "compaction_head_" +
            std::to_string(f.db.TopicId("fresh")) + "_head_all_or_none",
        "CREATE TABLE " + schema + ".mine (x int)",
        "INSERT INTO " + schema + ".topic (name) VALUES ('sneaky')",
        "DELETE FROM " + schema + ".topic",
        "UPDATE " + schema + ".janitor_state SET claimed_by = 'me'"}) {
    INFO(sql);
    CHECK(raw.TryExec(sql) == kInsufficientPrivilege);
  }
  CHECK(SqlStateOf([&] { topic.Destroy(); }) == kInsufficientPrivilege);
  // The owner role may update every column, but created_at is immutable for
  // it too (the head table's trigger).
  CHECK(RawConn("user=" + f.Login("owner"))
            .TryExec("UPDATE " + head +
                     " SET created_at = now() - interval '1 day'") == "23514");
  // What the function itself refuses: the table's CHECKs hold for it too.
  CHECK(raw.TryExec("SELECT * FROM " + schema +
                    ".register_topic('Bad Name', 1000, NULL, NULL)") ==
        "23514");
  CHECK(raw.TryExec("SELECT * FROM " + schema +
                    ".register_topic('ok', 0, NULL, NULL)") == "23514");
  CHECK(raw.TryExec("SELECT * FROM " + schema +
                    ".register_topic('ok', NULL, -1, NULL)") == "23514");
}

TEST_CASE(
    "roles: the janitor role sweeps and cleans but cannot drop, truncate or "
    "rewrite") {
  RoleFixture f;
  const std::string head = f.db.HeadTable("early");
  testing::InsertHeadless(f.db.raw(), head, "old", 5);
  auto janitor_client = f.ClientAs("janitor");
  compaction::Janitor janitor(janitor_client);
  const compaction::SweepResult swept = janitor.SweepHeadless("early");
  CHECK(swept.deleted == 5);
  CHECK(f.db.raw().Int("SELECT count(*) FROM " + head) == 0);
  CHECK(f.db.raw().Value("SELECT last_error FROM " + f.db.QuotedSchema() +
                         ".janitor_state") == std::nullopt);
  // It exports stats (member of the monitor role).
  CHECK(janitor_client.ListTopicStats().size() == 1);

  testing::InsertHeadless(f.db.raw(), head, "young", 1, "1 second");
  RawConn raw("user=" + f.Login("janitor"));
  const std::string message = f.db.MessageTable("early");
  const std::string schema = f.db.QuotedSchema();
  for (const std::string& sql :
       {"DROP TABLE " + head, "DROP TABLE " + message, "TRUNCATE " + head,
        "TRUNCATE " + message, "UPDATE " + head + " SET message_key = 'x'",
        "UPDATE " + head + " SET created_at = now()",
        "SELECT * FROM " + message, "SELECT schema_version FROM " + message,
        "INSERT INTO " + message +
            " (schema_version, payload) VALUES (1, "
            "'{}')",
        "UPDATE " + message + " SET message_key = 'x'",
        "INSERT INTO " + head +
            " (message_key, created_at, updated_at, "
            "idle_since) VALUES ('n', now(), now(), now())",
        "DELETE FROM " + schema + ".topic",
        "UPDATE " + schema + ".topic SET headless_ttl_ms = 1",
        "UPDATE " + schema + ".janitor_state SET topic_id = 0",
        "UPDATE " + schema + ".log_cleaner_state SET topic_id = 0",
        "CREATE TABLE " + schema + ".mine (x int)",
        "SELECT * FROM " + schema + ".register_topic('x', 1000, NULL, NULL)",
        // No direct write of head or message rows at all: the sweeps run
        // through the baseline's functions (privilege_test.cpp).
        "UPDATE " + head + " SET idle_since = now() - interval '1 day'",
        "UPDATE " + head + " SET head_id = 1",
        "UPDATE " + head + " SET updated_at = now() - interval '1 day'",
        "DELETE FROM " + head, "DELETE FROM " + message,
        "UPDATE " + message + " SET created_at = now()"}) {
    INFO(sql);
    CHECK(raw.TryExec(sql) == kInsufficientPrivilege);
  }
}

TEST_CASE(
    "roles: the janitor role runs the log cleaner, the app role produces "
    "tombstones") {
  RoleFixture f;
  auto app = f.ClientAs("app");
  auto topic = app.Topic<Counter>("log");
  compaction::TopicConfig config;
  config.retention = std::chrono::milliseconds(0);
  config.tombstone_retention = std::chrono::milliseconds(0);
  topic.Register(config);
  auto producer = topic.RegisterProducer();
  producer.Produce(Counter{1}, testing::Compacted("k"));
  producer.Produce(Counter{2}, testing::Compacted("k"));
  producer.ProduceTombstone("gone");
  auto janitor_client = f.ClientAs("janitor");
  compaction::Janitor janitor(janitor_client);
  const compaction::CompactResult r = janitor.CompactLog("log");
  CHECK(r.deleted == 2);
  CHECK(r.tombstones_expired == 1);
  CHECK(topic.Key("k").CompactionHead()->message.value == 2);
  // The monitor role sees the cleaner's figures.
  const compaction::TopicStats stats = f.ClientAs("monitor").Stats("log");
  CHECK(stats.cleaner.total_deleted_rows == 2);
  CHECK(stats.total_tombstones_expired == 1);
  CHECK(stats.cleaner.last_error.empty());
  // The app role cannot clean.
  compaction::Janitor not_janitor(app);
  CHECK(SqlStateOf([&] { not_janitor.CompactLog("log"); }) ==
        kInsufficientPrivilege);
}

TEST_CASE("roles: the monitor role reads stats and nothing else") {
  RoleFixture f;
  testing::InsertHeadless(f.db.raw(), f.db.HeadTable("early"), "old", 3);
  auto monitor = f.ClientAs("monitor");
  CHECK(monitor.Stats("early").headless_rows == 3);
  const auto all = monitor.ListTopicStats();
  REQUIRE(all.size() == 1);
  CHECK(all[0].stats.headless_rows == 3);
  CHECK(monitor.ListTopics().size() == 1);

  auto topic = monitor.Topic<Counter>("early");
  CHECK(SqlStateOf([&] {
          topic.RegisterProducer().Produce(Counter{1}, testing::Compacted("k"));
        }) == kInsufficientPrivilege);
  CHECK(SqlStateOf([&] { topic.Key("k").CompactionHead(); }) ==
        kInsufficientPrivilege);
  CHECK(SqlStateOf([&] { topic.Register(); }) == kInsufficientPrivilege);
  compaction::Janitor janitor(monitor);
  CHECK(SqlStateOf([&] { janitor.SweepHeadless("early"); }) ==
        kInsufficientPrivilege);
  CHECK(f.db.raw().Int("SELECT count(*) FROM " + f.db.HeadTable("early")) == 3);

  RawConn raw("user=" + f.Login("monitor"));
  for (const std::string& sql :
       {"SELECT * FROM " + f.db.MessageTable("early"),
        "SELECT message_key FROM " + f.db.HeadTable("early"),
        "DELETE FROM " + f.db.HeadTable("early")}) {
    INFO(sql);
    CHECK(raw.TryExec(sql) == kInsufficientPrivilege);
  }
}

namespace {

// Backends of any test waiting for a lock on `db`'s topic table.
std::int64_t TopicLockWaiters(LiveDb& db) {
  return db.raw().Int(
      "SELECT count(*) FROM pg_locks WHERE NOT granted AND relation = "
      "to_regclass($1)",
      {db.QuotedSchema() + ".topic"});
}

// Waits until `n` backends wait for the topic table, or `done` is ready
// (an InstallRoles that did not wait); false after 10 s.
bool AwaitTopicLockWaiters(LiveDb& db, int n, const std::future<void>& done) {
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline) {
    if (TopicLockWaiters(db) >= n) return true;
    if (done.wait_for(std::chrono::milliseconds(5)) ==
        std::future_status::ready) {
      return false;
    }
  }
  return false;
}

}  // namespace

TEST_CASE(
    "roles: InstallRoles waits for a registration in flight and grants its "
    "topic") {
  RoleFixture f{RoleFixture::Deferred{}};
  // A registration that has inserted its topic and called grant_topic (the
  // no-op of a schema without roles), not yet committed. (On a first
  // install the transfer of the tables to the owner role waits for it too;
  // on later runs only the script's lock does.)
  RawConn registering;
  registering.Query("BEGIN");
  registering.Query("SELECT id FROM " + f.db.QuotedSchema() +
                    ".register_topic('inflight', 3600000, 604800000, "
                    "86400000)");
  compaction::Client installer = f.db.NewClient(1);
  std::future<void> installed =
      std::async(std::launch::async, [&] { installer.InstallRoles(""); });
  CHECK(AwaitTopicLockWaiters(f.db, 1, installed));
  registering.Query("COMMIT");
  installed.get();
  const std::string message = f.db.MessageTable("inflight");
  const std::string head = f.db.HeadTable("inflight");
  // Its tables belong to the owner role, as every table does (the transfer
  // lists the tables when it starts, so it must start after the commit).
  for (const std::string& table : {message, head}) {
    INFO(table);
    CHECK(f.db.raw().Value("SELECT relowner::regrole::text FROM pg_class "
                           "WHERE oid = $1::regclass",
                           {table}) == f.Role("owner"));
  }
  for (const auto& [role, table, privilege] :
       std::vector<std::tuple<std::string, std::string, std::string>>{
           {f.Role("app"), message, "SELECT"},
           {f.Role("app"), message, "INSERT"},
           {f.Role("app"), head, "SELECT"},
           {f.Role("monitor"), head, "SELECT"}}) {
    INFO(role << " " << privilege << " on " << table);
    CHECK(f.db.raw().Value(
              "SELECT has_any_column_privilege($1, $2::regclass, $3)",
              {role, table, privilege}) == "t");
  }
  // Two runs at once queue on the same lock; neither fails ("tuple
  // concurrently updated" on their GRANTs).
  RawConn holder;
  holder.Query("BEGIN");
  holder.Query("LOCK TABLE " + f.db.QuotedSchema() +
               ".topic IN SHARE ROW EXCLUSIVE MODE");
  compaction::Client second = f.db.NewClient(1);
  std::future<void> first_run =
      std::async(std::launch::async, [&] { installer.InstallRoles(""); });
  std::future<void> second_run =
      std::async(std::launch::async, [&] { second.InstallRoles(""); });
  CHECK(AwaitTopicLockWaiters(f.db, 2, first_run));
  holder.Query("COMMIT");
  CHECK_NOTHROW(first_run.get());
  CHECK_NOTHROW(second_run.get());
}

TEST_CASE("roles: bad role prefixes and uninstalled schemas are refused") {
  LiveDb db;
  CHECK_THROWS_AS(db.client().InstallRoles("Bad-Prefix"),
                  compaction::InvalidArgument);
  CHECK_THROWS_AS(db.client().InstallRoles("pg_x"),
                  compaction::InvalidArgument);
  CHECK_THROWS_AS(db.client().InstallRoles(std::string(60, 'a')),
                  compaction::InvalidArgument);
  compaction::ClientOptions options;
  options.schema = testing::Unique("never_");
  auto never = compaction::Client::Connect("", options);
  CHECK_THROWS_AS(never.InstallRoles(""), compaction::SchemaVersionMismatch);
}

TEST_CASE(
    "schema install into a pre-created schema needs no CREATE on the "
    "database") {
  testing::RawConn admin;
  const std::string installer = testing::Unique("installer_");
  const std::string schema = testing::Unique("precreated_");
  admin.Query("CREATE ROLE \"" + installer + "\" LOGIN");
  admin.Query("CREATE SCHEMA \"" + schema + "\" AUTHORIZATION \"" + installer +
              "\"");
  CHECK(admin.Value("SELECT has_database_privilege($1, current_database(), "
                    "'CREATE')",
                    {installer}) == "f");
  {
    compaction::ClientOptions options;
    options.schema = schema;
    auto client = compaction::Client::Connect("user=" + installer, options);
    CHECK_NOTHROW(client.InstallSchema());
    auto topic = client.Topic<Counter>("t");
    topic.Register();
    topic.RegisterProducer().Produce(Counter{4}, testing::Compacted("k"));
    CHECK(topic.Key("k").CompactionHead()->message.value == 4);
    CHECK_NOTHROW(client.InstallSchema());  // installed: a no-op
  }
  admin.TryExec("DROP SCHEMA \"" + schema + "\" CASCADE");
  admin.TryExec("DROP ROLE \"" + installer + "\"");
}

TEST_CASE("roles: the app role's plain produces name or default a partition") {
  RoleFixture f;
  auto app = f.ClientAs("app");
  auto topic = app.Topic<Counter>("spread");
  compaction::TopicConfig config;
  config.partitions = 3;
  topic.Register(config);
  auto producer = topic.RegisterProducer();
  for (int i = 0; i < 6; ++i) {
    producer.Produce(Counter{i});  // the default reads the id: currval
    producer.Produce(Counter{i}, compaction::ProduceOptions{
                                     "k" + std::to_string(i), std::nullopt});
  }
  const std::string table = f.db.MessageTable("spread");
  CHECK(f.db.raw().Int("SELECT count(DISTINCT partition) FROM " + table +
                       " WHERE message_key IS NULL") == 3);
  CHECK(f.db.raw().Int(
            "SELECT count(*) FROM " + table +
            " WHERE message_key IS NOT NULL AND partition = "
            "((hashtextextended(message_key, 0) % 3 + 3) % 3)::integer") == 6);
  if (testing::SkipOnCitus(
          "its direct INSERT: on Citus the app role's direct INSERTs into "
          "message tables are refused (42501, test citus.roles); it "
          "produces through produce_plain_<id>")) {
    return;
  }
  RawConn raw("user=" + f.Login("app"));
  const int right = static_cast<int>(
      raw.Int("SELECT ((hashtextextended('x', 0) % 3 + 3) % 3)::integer"));
  CHECK(raw.TryExec("INSERT INTO " + table +
                    " (message_key, schema_version, payload, partition) "
                    "VALUES ('x', 1, '{}', " +
                    std::to_string((right + 1) % 3) + ")") == "23514");
}

TEST_CASE("roles: plain produces need no PUBLIC execute on the CHECK") {
  RoleFixture f;
  auto app = f.ClientAs("app");
  auto topic = app.Topic<Counter>("hardened");
  // Four partitions: a one-partition topic's CHECK tests partition = 0
  // without calling in_partition_<id>.
  compaction::TopicConfig config;
  config.partitions = 4;
  topic.Register(config);
  // A hardened database: functions are not executable by PUBLIC.
  f.db.raw().Query("REVOKE EXECUTE ON FUNCTION " + f.db.QuotedSchema() +
                   ".in_partition_" + std::to_string(f.db.TopicId("hardened")) +
                   "(text, integer) FROM PUBLIC");
  auto producer = topic.RegisterProducer();
  producer.Produce(Counter{1});
  producer.Produce(Counter{2}, compaction::ProduceOptions{"k", std::nullopt});
  CHECK(f.db.raw().Int("SELECT count(*) FROM " +
                       f.db.MessageTable("hardened")) == 2);
}
