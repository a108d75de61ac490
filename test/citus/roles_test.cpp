// The least-privilege roles (sql/roles_v1.sql) on a coordinator and two
// workers (test/citus/with_cluster.sh): what Citus needs of them and what
// it refuses. The role suites of test/pg run on the cluster too
// (citus.pg_roles); this file checks the Citus-only facts.
#include <catch2/catch.hpp>
#include <string>

#include "live_db.hpp"
#include "role_fixture.hpp"

using testing::Counter;
using testing::RawConn;
using testing::RoleFixture;

namespace {

compaction::TopicConfig FourShards() {
  compaction::TopicConfig config;
  config.partitions = 4;
  return config;
}

// Every result of run_command_on_shards(table, command), as "t"/"f"...
// joined by spaces, in shard order; a failed command shows as its error.
std::string OnShards(RawConn& raw, const std::string& table,
                     const std::string& command) {
  return raw
      .Value(
          "SELECT pg_catalog.string_agg(CASE WHEN success THEN result ELSE "
          "'error: ' || result END, ' ' ORDER BY shardid) FROM "
          "pg_catalog.run_command_on_shards($1, $2)",
          {table, command})
      .value_or("");
}

}  // namespace

TEST_CASE(
    "roles on Citus: the owner may log in on every node, the functions the "
    "app calls run as the owner") {
  RoleFixture f;
  RawConn& raw = f.db.raw();
  const std::string owner = f.db.schema() + "_owner";
  // The coordinator opens a SECURITY DEFINER function's worker connections
  // as its owner: NOLOGIN failed every produce ("not permitted to log in").
  CHECK(raw.Value("SELECT rolcanlogin::text FROM pg_roles WHERE rolname = $1",
                  {owner}) == "true");
  CHECK(raw.Value("SELECT pg_catalog.string_agg(result, ' ') FROM "
                  "pg_catalog.run_command_on_workers(pg_catalog.format("
                  "'SELECT rolcanlogin FROM pg_roles WHERE rolname = %L', "
                  "$1::text))",
                  {owner}) == "t t");
  // The app, janitor and monitor roles stay NOLOGIN.
  CHECK(raw.Int("SELECT count(*) FROM pg_roles WHERE rolname = ANY ($1) AND "
                "rolcanlogin",
                {"{" + f.db.schema() + "_app," + f.db.schema() + "_janitor," +
                 f.db.schema() + "_monitor}"}) == 0);

  f.ClientAs("app").Topic<Counter>("spread").Register(FourShards());
  const std::string id = std::to_string(f.db.TopicId("spread"));
  for (const char* fn : {"lock_", "produce_", "produce_plain_"}) {
    INFO(fn);
    CHECK(raw.Value("SELECT p.prosecdef::text || ' ' || "
                    "pg_get_userbyid(p.proowner) FROM pg_proc p WHERE "
                    "p.pronamespace = $1::regnamespace AND p.proname = $2",
                    {f.db.QuotedSchema(), fn + id}) == "true " + owner);
  }
}

TEST_CASE(
    "roles on Citus: grant_topic's grants reach every shard, and the app "
    "role's direct INSERT is refused") {
  RoleFixture f;
  auto app = f.ClientAs("app");
  auto topic = app.Topic<Counter>("spread");
  topic.Register(FourShards());
  RawConn& raw = f.db.raw();
  const std::string message = f.db.MessageTable("spread");
  const std::string head = f.db.HeadTable("spread");
  const std::string s = f.db.schema();
  // The shards carry the shell table's grants (Citus propagates GRANT on
  // a distributed table), column grants included.
  CHECK(OnShards(raw, message,
                 "SELECT has_table_privilege('" + s +
                     "_app', '%s', "
                     "'SELECT')") == "t t t t");
  CHECK(OnShards(raw, message,
                 "SELECT has_column_privilege('" + s +
                     "_app', '%s', "
                     "'payload', 'INSERT')") == "t t t t");
  CHECK(OnShards(raw, message,
                 "SELECT has_column_privilege('" + s +
                     "_app', '%s', "
                     "'created_at', 'INSERT')") == "f f f f");
  CHECK(OnShards(raw, message,
                 "SELECT has_table_privilege('" + s +
                     "_janitor', '%s', "
                     "'SELECT')") == "f f f f");
  CHECK(OnShards(raw, head,
                 "SELECT has_column_privilege('" + s +
                     "_monitor', '%s', "
                     "'idle_since', 'SELECT')") == "t t t t");
  CHECK(OnShards(raw, head,
                 "SELECT has_column_privilege('" + s +
                     "_monitor', '%s', "
                     "'message_key', 'SELECT')") == "f f f f");

  // Through the library the app role produces, locks and reads.
  auto producer = topic.RegisterProducer();
  producer.Produce(Counter{1});
  producer.Produce(Counter{2},
                   compaction::ProduceOptions{"plain", std::nullopt});
  CHECK(testing::Increment(app, topic.Key("k"), producer) == 1);
  CHECK(topic.Key("k").CompactionHead()->message.value == 1);
  CHECK(raw.Int("SELECT count(*) FROM " + message) == 3);

  // Directly, it cannot: Citus fills id, created_at and xid from their
  // defaults on the coordinator and names them in the shard's INSERT,
  // where the app role has no INSERT on them; a head row needs the
  // partition, which it may not insert. Refused, nothing written.
  RawConn as_app = f.RawAs("app");
  CHECK(as_app.TryExec("INSERT INTO " + message +
                       " (message_key, schema_version, payload, partition) "
                       "SELECT 'x', 1, '{}', ((hashtextextended('x', 0) % 4 "
                       "+ 4) % 4)::integer") == "42501");
  CHECK(as_app.TryExec("INSERT INTO " + head +
                       " (message_key, partition) SELECT 'y', "
                       "((hashtextextended('y', 0) % 4 + 4) % 4)::integer") ==
        "42501");
  CHECK(raw.Int("SELECT count(*) FROM " + message) == 3);
}
