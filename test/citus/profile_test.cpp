// The Citus profile on a coordinator and two workers
// (test/citus/with_cluster.sh): the distributed layout InstallSchema
// installs and records, the refusal of a schema of the other profile, and
// a one-key produce that commits on one worker without two-phase commit.
#include <catch2/catch.hpp>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "live_db.hpp"

using testing::Counter;
using testing::LiveDb;
using testing::RawConn;

namespace {

// The commands the coordinator sent to the workers, from the NOTICEs
// citus.log_remote_commands raises on the library's own connections.
struct RemoteCommands {
  std::mutex mutex;
  std::vector<std::string> issued;
  compaction::NoticeHandler Handler() {
    return [this](const compaction::Notice& n) {
      if (n.message.rfind("issuing ", 0) != 0) return;
      std::lock_guard lock(mutex);
      issued.push_back(n.message);
    };
  }
  std::vector<std::string> Take() {
    std::lock_guard lock(mutex);
    return std::exchange(issued, {});
  }
};

std::string Join(const std::vector<std::string>& lines) {
  std::string out;
  for (const std::string& line : lines) out += line.substr(0, 300) + "\n";
  return out;
}

int Count(const std::vector<std::string>& lines, const std::string& text) {
  int n = 0;
  for (const std::string& line : lines) {
    if (line.find(text) != std::string::npos) ++n;
  }
  return n;
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
