// The Citus profile on a coordinator and two workers
// (test/citus/with_cluster.sh): the distributed layout InstallSchema
// installs and records, the refusal of a schema of the other profile, and
// a one-key produce that commits on one worker without two-phase commit.
#include <libpq-fe.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "live_db.hpp"
#include "remote_commands.hpp"

using testing::Count;
using testing::Counter;
using testing::Join;
using testing::LiveDb;
using testing::RawConn;
using testing::RemoteCommands;

namespace {

// Collects what citus.log_remote_commands reports on a RawConn.
void Collect(void* lines, const char* message) {
  static_cast<std::vector<std::string>*>(lines)->push_back(message);
}
void LogRemoteCommands(RawConn& conn, std::vector<std::string>* lines) {
  PQsetNoticeProcessor(conn.get(), Collect, lines);
  conn.Query("SET client_min_messages = notice");
  conn.Query("SET citus.log_remote_commands = on");
}

// What pg_dist_partition says of a table of the test's schema: its method
// ('h' hash-distributed, 'n' none), replication model ('t' reference, 's'
// otherwise) and co-location group; empty when Citus does not know it.
std::string Placement(RawConn& raw, const std::string& table) {
  return raw
      .Value(
          "SELECT pg_catalog.concat_ws(' ', p.partmethod, p.repmodel, "
          "p.colocationid) "
          "FROM pg_catalog.pg_dist_partition p WHERE p.logicalrelid = "
          "pg_catalog.to_regclass($1)",
          {table})
      .value_or("");
}

}  // namespace

TEST_CASE(
    "InstallSchema on a Citus coordinator installs the distributed layout "
    "and records it") {
  LiveDb db;
  const std::string s = db.QuotedSchema();
  CHECK(db.raw().Value("SELECT profile FROM " + s +
                       ".schema_version WHERE topic_id IS NULL") == "citus");
  // topic and schema_version on every node; the hot bookkeeping tables on
  // the coordinator only.
  CHECK(Placement(db.raw(), s + ".topic").rfind("n t ", 0) == 0);
  CHECK(Placement(db.raw(), s + ".schema_version").rfind("n t ", 0) == 0);
  for (const char* local :
       {".janitor_state", ".log_cleaner_state", ".consumer_position"}) {
    INFO(local);
    CHECK(Placement(db.raw(), s + local).rfind("n s ", 0) == 0);
  }

  compaction::TopicConfig config;
  config.partitions = 4;
  db.client().Topic<Counter>("spread").Register(config);
  const std::string message = db.MessageTable("spread");
  const std::string head = db.HeadTable("spread");
  const std::string m = Placement(db.raw(), message);
  const std::string h = Placement(db.raw(), head);
  CHECK(m.rfind("h s ", 0) == 0);
  CHECK(h == m);  // hash-distributed, in one co-location group
  CHECK(db.raw().Value(
            "SELECT pg_catalog.column_to_column_name(logicalrelid, partkey) "
            "FROM pg_catalog.pg_dist_partition WHERE logicalrelid = "
            "pg_catalog.to_regclass($1)",
            {head}) == "partition");
  CHECK(db.raw().Int("SELECT count(*) FROM pg_catalog.citus_shards WHERE "
                     "table_name = pg_catalog.to_regclass($1)",
                     {message}) == 4);
  CHECK(db.raw().Int("SELECT count(DISTINCT nodeport) FROM "
                     "pg_catalog.citus_shards WHERE table_name = "
                     "pg_catalog.to_regclass($1)",
                     {message}) == 2);
}

TEST_CASE(
    "a compacted produce of one key commits on one worker without two-phase "
    "commit; keys on both workers take 2PC") {
  LiveDb db;
  compaction::TopicConfig config;
  config.partitions = 4;
  db.client().Topic<Counter>("one-key").Register(config);

  RemoteCommands remote;
  compaction::ClientOptions options = testing::ClientOptionsForTests();
  options.schema = db.schema();
  options.notice_handler = remote.Handler();
  compaction::Client client = compaction::Client::Connect(
      testing::ClientConninfo("options='-c citus.log_remote_commands=on "
                              "-c client_min_messages=notice'"),
      options);
  auto producer = client.Topic<Counter>("one-key").RegisterProducer();
  remote.Take();

  for (int i = 1; i <= 3; ++i) {
    producer.Produce(Counter{i}, testing::Compacted("k", i));
  }
  std::vector<std::string> issued = remote.Take();
  INFO(Join(issued));
  CHECK(Count(issued, "issuing INSERT INTO") == 6);  // message + head, 3x
  CHECK(Count(issued, "issuing COMMIT") == 3);
  CHECK(Count(issued, "PREPARE TRANSACTION") == 0);
  CHECK(db.raw().Value("SELECT m.payload ->> 'value' FROM " +
                       db.HeadTable("one-key") + " h JOIN " +
                       db.MessageTable("one-key") +
                       " m ON m.id = h.head_id AND m.partition = h.partition "
                       "WHERE h.message_key = 'k'") == "3");

  // The control: this log does show a two-phase commit when one happens.
  client.InTransaction([&](compaction::Tx& tx) {
    for (int i = 0; i < 16; ++i) {
      producer.ProduceInTx(tx, Counter{i},
                           testing::Compacted("key-" + std::to_string(i)));
    }
  });
  issued = remote.Take();
  INFO(Join(issued));
  CHECK(Count(issued, "PREPARE TRANSACTION") == 2);
}

TEST_CASE(
    "a single-node schema in a database that gained the citus extension is "
    "refused with SchemaProfileMismatch") {
  RawConn admin;
  const std::string name = testing::Unique("plain_");
  admin.Query("CREATE DATABASE " + name);
  {
    compaction::ClientOptions options = testing::ClientOptionsForTests();
    options.schema = "compaction";
    compaction::Client::Connect("dbname=" + name, options).InstallSchema();
    RawConn in_db("dbname=" + name);
    CHECK(in_db.Value("SELECT profile FROM compaction.schema_version WHERE "
                      "topic_id IS NULL") == "single");
    in_db.Query("CREATE EXTENSION citus");
    try {
      compaction::Client::Connect("dbname=" + name, options);
      FAIL("no SchemaProfileMismatch");
    } catch (const compaction::SchemaProfileMismatch& e) {
      CHECK(e.installed_profile() == "single");
      CHECK(e.database_profile() == "citus");
      CHECK(std::string(e.what()).find("has the citus extension") !=
            std::string::npos);
    }
  }
  admin.Query("DROP DATABASE " + name + " WITH (FORCE)");
}

TEST_CASE(
    "a lock and a compacted produce of one key run on one worker with a "
    "plain commit") {
  LiveDb db;
  compaction::TopicConfig config;
  config.partitions = 4;
  db.client().Topic<Counter>("lock-produce").Register(config);
  const std::string id = std::to_string(db.TopicId("lock-produce"));
  const std::string s = db.QuotedSchema();
  RawConn conn;
  std::vector<std::string> issued;
  LogRemoteCommands(conn, &issued);
  // A new key (the lock inserts its headless row), then a key with a head.
  for (const char* expected : {"e", "h"}) {
    conn.Query("BEGIN");
    CHECK(conn.Value("SELECT status::text FROM " + s + ".lock_" + id +
                     "('k', false)") == expected);
    CHECK(conn.Value("SELECT advanced::text FROM " + s + ".produce_" + id +
                     "('k', 1, 1, '{\"value\": 1}')") == "true");
    conn.Query("COMMIT");
  }
  INFO(Join(issued));
  CHECK(Count(issued, "FOR UPDATE") == 2);
  CHECK(Count(issued, "issuing COMMIT") == 2);
  CHECK(Count(issued, "PREPARE TRANSACTION") == 0);
}

TEST_CASE(
    "a lock_timeout set with set_config reaches the worker the lock waits "
    "on") {
  LiveDb db;
  compaction::TopicConfig config;
  config.partitions = 4;
  db.client().Topic<Counter>("timeout").Register(config);
  const std::string id = std::to_string(db.TopicId("timeout"));
  const std::string lock =
      "SELECT status::text FROM " + db.QuotedSchema() + ".lock_" + id;
  RawConn holder;
  // A committed headless row first: an uncommitted one is invisible to a
  // plain SELECT .. FOR UPDATE, which would not wait for it.
  REQUIRE(holder.Value(lock + "('k', false)") == "e");
  holder.Query("BEGIN");
  REQUIRE(holder.Value(lock + "('k', false)") == "e");

  RawConn waiter;
  waiter.Query("BEGIN");
  waiter.Query("SELECT pg_catalog.set_config('lock_timeout', '200ms', true)");
  waiter.Query("SAVEPOINT guarded");
  const auto start = std::chrono::steady_clock::now();
  CHECK(waiter.TryExec(lock + "('k', true)") == "55P03");
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(5));
  waiter.Query("ROLLBACK TO SAVEPOINT guarded");
  // The transaction goes on: another key locks at once.
  CHECK(waiter.Value(lock + "('other', true)") == "e");
  // Once the lock is held, the caller's own settings are as it left them.
  CHECK(waiter.Value("SELECT pg_catalog.current_setting('lock_timeout')") ==
        "200ms");
  CHECK(waiter.Value("SELECT pg_catalog.current_setting("
                     "'citus.propagate_set_commands')") == "none");
  waiter.Query("ROLLBACK");

  // Why lock_<id> re-sets it: the same lock as a plain statement keeps
  // waiting on the worker until the coordinator's statement_timeout ends it.
  RawConn plain;
  plain.Query("BEGIN");
  plain.Query(
      "SELECT pg_catalog.set_config('lock_timeout', '200ms', true), "
      "pg_catalog.set_config('statement_timeout', '2s', true)");
  CHECK(plain.TryExec(
            "SELECT h.head_id FROM " + db.HeadTable("timeout") +
            " h WHERE h.message_key = 'k' AND h.partition = "
            "((pg_catalog.hashtextextended('k', 0) % 4 + 4) % 4)::integer "
            "FOR UPDATE OF h") == "57014");
  plain.Query("ROLLBACK");
  holder.Query("ROLLBACK");
}
