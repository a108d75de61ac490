// Least privilege that holds against a hostile login of each shipped role
// (issue 23 rows 1, 2 and 5): the attacks run verbatim as that role, and
// the database refuses each. doc/roles.md has the table these rows test.
#include <catch2/catch.hpp>
#include <chrono>
#include <string>

#include "citus_profile.hpp"
#include "live_db.hpp"
#include "role_fixture.hpp"

using testing::Counter;
using testing::RawConn;
using testing::RoleFixture;
using testing::SqlStateOf;

namespace {

constexpr std::string_view kInsufficientPrivilege = "42501";
constexpr std::string_view kCheckViolation = "23514";
constexpr std::string_view kInvalidParameter = "22023";

std::string Str(std::int64_t n) { return std::to_string(n); }

// Produces value 1..n for `key` as the owner; returns the first message id.
std::int64_t ProduceHistory(RoleFixture& f, const std::string& topic,
                            const std::string& key, int n) {
  auto producer = f.db.client().Topic<Counter>(topic).RegisterProducer();
  std::int64_t first = 0;
  for (int v = 1; v <= n; ++v) {
    const auto r = producer.Produce(Counter{v}, testing::Compacted(key));
    if (v == 1) first = r.id;
  }
  return first;
}

}  // namespace

TEST_CASE(
    "privilege: the app role can neither shorten a topic's retention nor "
    "repoint a head, so the cleaner keeps the current value (issue 23 row "
    "1)") {
  RoleFixture f;
  f.db.client().Topic<Counter>("victim").Register();
  const std::int64_t first = ProduceHistory(f, "victim", "acct", 5);
  const std::string schema = f.db.QuotedSchema();
  const std::string retention =
      "SELECT retention_ms || ' ' || "
      "tombstone_retention_ms FROM " +
      schema + ".topic WHERE name = 'victim'";
  const auto before = f.db.raw().Value(retention);

  RawConn app("user=" + f.Login("app"));
  CHECK(app.TryExec("SELECT * FROM " + schema +
                    ".register_topic('victim', 1, 0, 0)") ==
        kInsufficientPrivilege);
  compaction::TopicConfig zero;
  zero.retention = std::chrono::milliseconds(0);
  zero.tombstone_retention = std::chrono::milliseconds(0);
  auto app_client = f.ClientAs("app");
  CHECK(SqlStateOf([&] {
          app_client.Topic<Counter>("victim").Register(zero);
        }) == kInsufficientPrivilege);
  CHECK(f.db.raw().Value(retention) == before);
  CHECK(app.TryExec("UPDATE " + f.db.HeadTable("victim") +
                    " SET head_id = " + Str(first) +
                    " WHERE message_key = 'acct'") == kInsufficientPrivilege);

  auto janitor_client = f.ClientAs("janitor");
  compaction::Janitor janitor(janitor_client);
  janitor.CompactLog("victim");
  CHECK(f.db.client()
            .Topic<Counter>("victim")
            .Key("acct")
            .CompactionHead()
            ->message.value == 5);
  CHECK(f.db.raw().Int("SELECT count(*) FROM " + f.db.MessageTable("victim")) ==
        5);
}

TEST_CASE(
    "privilege: topic settings change only through the owner role (or a "
    "role it grants the UPDATE), the app role registers new topics with "
    "settings and existing ones unchanged") {
  RoleFixture f;
  auto app = f.ClientAs("app");
  auto topic = app.Topic<Counter>("mine");
  compaction::TopicConfig hour;
  hour.retention = std::chrono::hours(1);
  CHECK(topic.Register(hour).retention == std::chrono::hours(1));
  // Every start of an application: unset or equal settings.
  CHECK(topic.Register().retention == std::chrono::hours(1));
  CHECK(topic.Register(hour).retention == std::chrono::hours(1));

  compaction::TopicConfig zero;
  zero.retention = std::chrono::milliseconds(0);
  try {
    topic.Register(zero);
    FAIL("the app role changed a setting");
  } catch (const compaction::DatabaseError& e) {
    CHECK(e.sqlstate() == kInsufficientPrivilege);
    CHECK_THAT(e.what(), Catch::Contains("needs the owner role") &&
                             Catch::Contains("\"mine\""));
  }
  CHECK(f.db.client().Topic<Counter>("mine").Register().retention ==
        std::chrono::hours(1));

  // The owner role changes it; the application's registration at its next
  // start keeps working and keeps the owner's value.
  auto owner = f.ClientAs("owner");
  CHECK(owner.Topic<Counter>("mine").Register(zero).retention ==
        std::chrono::milliseconds(0));
  CHECK(topic.Register().retention == std::chrono::milliseconds(0));

  // A role the owner grants the UPDATE of the settings may change them.
  f.db.raw().Query(
      "GRANT UPDATE (headless_ttl_ms, retention_ms, "
      "tombstone_retention_ms, consumer_inactive_after_ms, updated_at) ON " +
      f.db.QuotedSchema() + ".topic TO \"" + f.Login("app") + "\"");
  CHECK(topic.Register(hour).retention == std::chrono::hours(1));
}

TEST_CASE(
    "privilege: the app role writes no head column and no server timestamp "
    "(issue 23 rows 1 and 2)") {
  RoleFixture f;
  auto app = f.ClientAs("app");
  auto topic = app.Topic<Counter>("early");
  topic.RegisterProducer().Produce(Counter{1}, testing::Compacted("k"));
  app.InTransaction([&](compaction::Tx& tx) {
    CHECK_FALSE(topic.Key("h").LockCompactionHead(tx).has_value());
  });
  const std::string message = f.db.MessageTable("early");
  const std::string head = f.db.HeadTable("early");
  const std::string schema = f.db.QuotedSchema();
  const std::string id = Str(f.db.TopicId("early"));
  RawConn raw("user=" + f.Login("app"));
  for (const std::string& sql :
       {// created_at and the identity are the server's.
        "INSERT INTO " + message +
            " (schema_version, payload, created_at) VALUES (1, '{}', "
            "'infinity')",
        "INSERT INTO " + message +
            " (schema_version, payload, created_at) VALUES (1, '{}', "
            "'9999-01-01')",
        "INSERT INTO " + message +
            " (id, schema_version, payload) OVERRIDING SYSTEM VALUE "
            "VALUES (1000000, 1, '{}')",
        // A compacted message or tombstone goes through produce_<id>.
        "INSERT INTO " + message +
            " (message_key, schema_version, compaction_rank, payload) "
            "VALUES ('k', 1, 99, '{}')",
        // Head rows: message_key only, and no head column.
        "INSERT INTO " + head +
            " (message_key, created_at) VALUES ('x', 'infinity')",
        "INSERT INTO " + head +
            " (message_key, updated_at, idle_since) VALUES ('x', "
            "'infinity', 'infinity')",
        "INSERT INTO " + head +
            " (message_key, head_id, schema_version, compaction_rank, "
            "idle_since) VALUES ('x', 1, 1, 1, NULL)",
        "UPDATE " + head + " SET head_id = 1 WHERE message_key = 'k'",
        "UPDATE " + head +
            " SET head_id = NULL, schema_version = NULL, "
            "compaction_rank = NULL, idle_since = now()",
        "UPDATE " + head + " SET compaction_rank = 99",
        "UPDATE " + head + " SET schema_version = 9",
        "UPDATE " + schema + ".topic SET retention_ms = 0",
        "SELECT * FROM " + schema + ".clean_messages(" + id + ", 0, 10)",
        "SELECT * FROM " + schema + ".clean_tombstones(" + id + ", 0, 10)",
        "SELECT * FROM " + schema + ".sweep_headless(" + id +
            ", 10, NULL, NULL)",
        "SELECT * FROM " + schema + ".count_tombstoned_keys(" + id + ", 0, 10)",
        "UPDATE " + schema + ".log_cleaner_state SET position = 1000000"}) {
    INFO(sql);
    CHECK(raw.TryExec(sql) == kInsufficientPrivilege);
  }
  // The refresh of a headless row (the lock) is the app role's own head
  // write: the server's time or earlier, never infinite or later.
  for (const char* value : {"'infinity'", "'-infinity'", "'9999-01-01'",
                            "now() + interval '1 hour'"}) {
    INFO(value);
    CHECK(raw.TryExec("UPDATE " + head + " SET updated_at = " +
                      std::string(value) + ", idle_since = " + value +
                      " WHERE message_key = 'h'") == kCheckViolation);
    CHECK(raw.TryExec("UPDATE " + head +
                      " SET updated_at = " + std::string(value) +
                      " WHERE message_key = 'k'") == kCheckViolation);
  }
  // The same holds for the owner role.
  CHECK(RawConn("user=" + f.Login("owner"))
            .TryExec("UPDATE " + head +
                     " SET updated_at = 'infinity' WHERE message_key = 'k'") ==
        kCheckViolation);
  // What the app role may do directly: a plain message and a headless row,
  // with the server's times.
  if (!testing::SkipOnCitus(
          "its direct INSERTs: on Citus the app role's direct INSERTs are "
          "refused (42501, test citus.roles); it produces and locks through "
          "produce_plain_<id> and lock_<id>")) {
    CHECK(raw.TryExec("INSERT INTO " + message +
                      " (message_key, schema_version, payload) VALUES ('p', "
                      "1, '{}')") == "");
    CHECK(raw.TryExec("INSERT INTO " + head + " (message_key) VALUES ('y')") ==
          "");
  }
  // Calling produce_<id> itself is a produce: the winner rule holds (a
  // lower rank does not move the head).
  CHECK(raw.Value("SELECT advanced FROM " + schema + ".produce_" + id +
                  "('k', 1, -5, '{\"value\": 0}')") == "f");
  CHECK(topic.Key("k").CompactionHead()->message.value == 1);
  CHECK(f.db.raw().Int("SELECT count(*) FROM " + message +
                       " WHERE NOT isfinite(created_at) OR created_at > "
                       "now()") == 0);
  CHECK(f.db.raw().Int(
            "SELECT count(*) FROM " + head +
            " WHERE NOT isfinite(created_at) OR NOT isfinite(updated_at) OR "
            "created_at > now() OR updated_at > now()") == 0);
}

TEST_CASE(
    "privilege: the janitor role cannot read payloads, repoint or delete "
    "heads, delete a current value or move the cleaner's position (issue 23 "
    "row 5)") {
  RoleFixture f;
  const std::int64_t first = ProduceHistory(f, "early", "acct", 3);
  const std::int64_t current = first + 2;
  const std::string message = f.db.MessageTable("early");
  const std::string head = f.db.HeadTable("early");
  const std::string schema = f.db.QuotedSchema();
  const std::string state = schema + ".log_cleaner_state";
  const std::string id = Str(f.db.TopicId("early"));
  testing::InsertHeadless(f.db.raw(), head, "young", 1, "1 second");
  RawConn raw("user=" + f.Login("janitor"));
  for (const std::string& sql :
       {"SELECT payload FROM " + message, "SELECT * FROM " + message,
        "SELECT message_key FROM " + message,
        "UPDATE " + head + " SET head_id = " + Str(first) +
            " WHERE message_key = 'acct'",
        "DELETE FROM " + head + " WHERE head_id IS NOT NULL",
        "DELETE FROM " + head, "DELETE FROM " + message,
        "DELETE FROM " + message + " WHERE id = " + Str(current),
        "SELECT * FROM " + schema + ".produce_" + id +
            "('acct', 1, 99, '{\"value\": 9}')"}) {
    INFO(sql);
    CHECK(raw.TryExec(sql) == kInsufficientPrivilege);
  }
  // The positions move only as the walk moves them.
  for (const char* set :
       {"position = 1000000", "tombstone_position = 1000000",
        "pending_position = 1000000, pending_xmax = '1'",
        "tombstone_pending_position = 1000000, tombstone_pending_xmax = '1'"}) {
    INFO(set);
    CHECK(raw.TryExec("UPDATE " + state + " SET " + std::string(set)) ==
          kCheckViolation);
  }
  CHECK(raw.TryExec("UPDATE " + state + " SET walked_position = 1000000") ==
        kInsufficientPrivilege);
  // Its functions start a walk only where it got to, and delete only what
  // the rules allow whatever they are given: nothing here (a young headless
  // row, a materialized head, messages inside their retention).
  CHECK(raw.TryExec("SELECT * FROM " + schema + ".clean_messages(" + id +
                    ", 1000000, 100)") == kInvalidParameter);
  CHECK(raw.TryExec("SELECT * FROM " + schema + ".clean_tombstones(" + id +
                    ", 1000000, 100)") == kInvalidParameter);
  CHECK(raw.Value("SELECT deleted FROM " + schema + ".sweep_headless(" + id +
                  ", 100, NULL, NULL)") == "0");
  CHECK(raw.Value("SELECT deleted FROM " + schema + ".clean_messages(" + id +
                  ", 0, 100)") == "0");
  CHECK(raw.Value("SELECT deleted FROM " + schema + ".clean_tombstones(" + id +
                  ", 0, 100)") == "0");

  CHECK(f.db.raw().Int("SELECT count(*) FROM " + message) == 3);
  CHECK(f.db.raw().Int("SELECT count(*) FROM " + head) == 2);
  CHECK(f.db.raw().Int("SELECT head_id FROM " + head +
                       " WHERE message_key = 'acct'") == current);
  CHECK(f.db.raw().Int("SELECT position + tombstone_position FROM " + state) ==
        0);
}

TEST_CASE(
    "privilege: the janitor's functions delete what the sweeps may, and its "
    "positions still move as the cleaner walks") {
  RoleFixture f;
  compaction::TopicConfig zero;
  zero.retention = std::chrono::milliseconds(0);
  zero.tombstone_retention = std::chrono::milliseconds(0);
  f.db.client().Topic<Counter>("early").Register(zero);
  ProduceHistory(f, "early", "acct", 3);
  f.db.client().Topic<Counter>("early").RegisterProducer().ProduceTombstone(
      "gone");
  const std::string head = f.db.HeadTable("early");
  testing::InsertHeadless(f.db.raw(), head, "old", 2);
  auto janitor_client = f.ClientAs("janitor");
  compaction::Janitor janitor(janitor_client);
  CHECK(janitor.SweepHeadless("early").deleted == 2);
  const compaction::CompactResult r = janitor.CompactLog("early");
  CHECK(r.deleted == 3);  // two old values and the tombstone
  CHECK(r.tombstones_expired == 1);
  // The pass recorded where it got to through the trigger's check. It turns
  // final in a later pass once every older transaction of the cluster has
  // ended, which other tests' transactions may delay (cleaner_test.cpp
  // covers that).
  janitor.CompactLog("early");
  CHECK(f.db.raw().Int("SELECT greatest(position, pending_position) FROM " +
                       f.db.QuotedSchema() + ".log_cleaner_state") > 0);
  CHECK(f.db.raw().Int("SELECT count(*) FROM " + f.db.MessageTable("early")) ==
        1);
  CHECK(f.db.client()
            .Topic<Counter>("early")
            .Key("acct")
            .CompactionHead()
            ->message.value == 3);
}

TEST_CASE("privilege: the monitor role calls none of the writing functions") {
  RoleFixture f;
  const std::string schema = f.db.QuotedSchema();
  const std::string id = Str(f.db.TopicId("early"));
  RawConn raw("user=" + f.Login("monitor"));
  for (const std::string& sql :
       {"SELECT * FROM " + schema + ".produce_" + id + "('k', 1, 1, '{}')",
        "SELECT * FROM " + schema + ".clean_messages(" + id + ", 0, 10)",
        "SELECT * FROM " + schema + ".sweep_headless(" + id +
            ", 10, NULL, NULL)",
        "SELECT * FROM " + schema + ".register_topic('x', NULL, NULL, NULL)",
        "UPDATE " + schema + ".log_cleaner_state SET last_error = 'x'"}) {
    INFO(sql);
    CHECK(raw.TryExec(sql) == kInsufficientPrivilege);
  }
}
