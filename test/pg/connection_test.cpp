// The connections the library opens (lib/src/pg): settings every one of
// them carries whatever the caller's conninfo says.
#include "pg/connection.hpp"

#include <libpq-fe.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>

#include "live_db.hpp"
#include "pg/pool.hpp"

using namespace compaction;
using namespace testing;

namespace {

// The options libpq actually used for `conn`.
std::map<std::string, std::string> Effective(PGconn* conn) {
  std::map<std::string, std::string> out;
  PQconninfoOption* options = PQconninfo(conn);
  for (PQconninfoOption* o = options; o->keyword != nullptr; ++o) {
    if (o->val != nullptr) out[o->keyword] = o->val;
  }
  PQconninfoFree(options);
  return out;
}

std::string Show(PGconn* conn, const std::string& setting) {
  PGresult* r = PQexec(conn, ("SHOW " + setting).c_str());
  std::string value =
      PQresultStatus(r) == PGRES_TUPLES_OK ? PQgetvalue(r, 0, 0) : "?";
  PQclear(r);
  return value;
}

}  // namespace

TEST_CASE(
    "library connections get timeouts and keepalives unless the conninfo sets "
    "them") {
  // A ROLLBACK on a peer that vanished from the network would otherwise
  // wait for the kernel's two-hour TCP timeout.
  pg::ConnPtr conn =
      pg::Connect(pg::ParseConninfo("", "test"), {}, "connection_test", "test");
  auto effective = Effective(conn.get());
  if (std::getenv("PGCONNECT_TIMEOUT") == nullptr) {
    CHECK(effective["connect_timeout"] == "10");
  }
  CHECK(effective["keepalives_idle"] == "10");
  CHECK(effective["keepalives_interval"] == "5");
  CHECK(effective["keepalives_count"] == "3");
  CHECK(effective["tcp_user_timeout"] == "30000");

  pg::ConnPtr own = pg::Connect(
      pg::ParseConninfo(
          "keepalives_idle=42 tcp_user_timeout=9000 connect_timeout=3", "test"),
      {}, "connection_test", "test");
  effective = Effective(own.get());
  CHECK(effective["keepalives_idle"] == "42");
  CHECK(effective["tcp_user_timeout"] == "9000");
  CHECK(effective["connect_timeout"] == "3");
  CHECK(effective["application_name"] == "connection_test");
}

TEST_CASE("library connections pin search_path after the caller's options") {
  pg::ConnPtr plain =
      pg::Connect(pg::ParseConninfo("", "test"), {}, "connection_test", "test");
  CHECK(Show(plain.get(), "search_path") == "pg_catalog,pg_temp");
  // The caller's own options survive; its search_path does not win.
  pg::ConnPtr own = pg::Connect(
      pg::ParseConninfo("options='-c work_mem=7MB -c search_path=public'",
                        "test"),
      {}, "connection_test", "test");
  CHECK(Show(own.get(), "work_mem") == "7MB");
  CHECK(Show(own.get(), "search_path") == "pg_catalog,pg_temp");
}

TEST_CASE("a schema name with placeholder braces is used as it is") {
  // Before the single-pass renderer, "{id}" inside the schema name was
  // replaced by the topic id and the tables landed in another schema.
  const std::string suffix = Unique("x");
  const std::string schema = "{id}" + suffix;
  RawConn raw;
  raw.TryExec("DROP SCHEMA IF EXISTS \"" + schema + "\" CASCADE");
  ClientOptions options;
  options.schema = schema;
  Client client = Client::Connect("", options);
  client.InstallSchema();
  auto topic = client.Topic<Counter>("braces");
  const auto info = topic.Register();
  topic.RegisterProducer().Produce(Counter{1}, Compacted("k"));
  CHECK(topic.Key("k").CompactionHead()->message.value == 1);
  const std::string id = std::to_string(info.id);
  CHECK(raw.Int("SELECT count(*) FROM pg_tables WHERE schemaname = $1 AND "
                "tablename IN ($2, $3)",
                {schema, "message_" + id, "compaction_head_" + id}) == 2);
  // Nothing landed in a schema named after the topic id.
  CHECK(raw.Int("SELECT count(*) FROM pg_namespace WHERE nspname = $1",
                {id + suffix}) == 0);
  raw.TryExec("DROP SCHEMA IF EXISTS \"" + schema + "\" CASCADE");
}

TEST_CASE("a schema name with a quote or a dollar is refused before install") {
  // Both end a quoting the baselines put the schema name in: "a'||'b"
  // installed, and the janitor's sweeps then read the TTLs of schema "ab".
  RawConn raw;
  for (const std::string schema : {"a'||'b", "o'k", "a$b"}) {
    INFO(schema);
    ClientOptions options;
    options.schema = schema + Unique("_");
    Client client = Client::Connect("", options);
    CHECK_THROWS_AS(client.InstallSchema(), compaction::InvalidArgument);
    CHECK_THROWS_WITH(client.InstallSchema(),
                      Catch::Contains("schema name must not contain"));
    CHECK(raw.Int("SELECT count(*) FROM pg_namespace WHERE nspname = $1",
                  {options.schema}) == 0);
  }
}

namespace {

// Statements prepared on the library's (single) pooled connection;
// pg_prepared_statements is per session, so ask on that connection.
std::int64_t PreparedOnLibraryConnections(Client& client) {
  std::int64_t n = 0;
  client.InTransaction([&](Tx& tx) {
    PGresult* r = PQexec(tx.native_handle(),
                         "SELECT count(*) FROM pg_prepared_statements");
    n = std::stoll(PQgetvalue(r, 0, 0));
    PQclear(r);
  });
  return n;
}

}  // namespace

TEST_CASE("prepared_statements = false sends every statement unnamed") {
  LiveDb db;
  ClientOptions options;
  options.schema = db.schema();
  options.pool_size = 1;  // every call below runs on this one connection
  options.prepared_statements = false;
  Client client = Client::Connect("", options);
  auto topic = client.Topic<Counter>("unnamed");
  topic.Register();
  auto producer = topic.RegisterProducer();
  producer.Produce(Counter{1}, Compacted("k"));
  client.InTransaction([&](Tx& tx) {
    auto head = topic.Key("k").LockCompactionHead(tx);  // the pipelined path
    producer.ProduceInTx(tx, Counter{head->message.value + 1}, Compacted("k"));
  });
  CHECK(topic.Key("k").CompactionHead()->message.value == 2);
  CHECK(topic.Stats().headless_rows == 0);
  Janitor janitor(client);
  CHECK(janitor.SweepHeadless("unnamed").deleted == 0);
  CHECK(PreparedOnLibraryConnections(client) == 0);

  // The default prepares, under names unique to the connection instance.
  ClientOptions prepared = options;
  prepared.prepared_statements = true;
  Client other = Client::Connect("", prepared);
  other.Topic<Counter>("unnamed").Key("k").CompactionHead();
  CHECK(PreparedOnLibraryConnections(other) > 0);
}

TEST_CASE("statement names differ between connection instances") {
  const std::string a = pg::RandomStatementPrefix();
  const std::string b = pg::RandomStatementPrefix();
  CHECK(a != b);
  CHECK(a.size() == 18);
  CHECK(a.front() == 'c');
  CHECK(a.back() == '_');
}

TEST_CASE(
    "library connections pin default_transaction_isolation after the "
    "caller's options") {
  pg::ConnPtr conn = pg::Connect(
      pg::ParseConninfo(
          "options='-c default_transaction_isolation=serializable'", "test"),
      {}, "connection_test", "test");
  CHECK(Show(conn.get(), "default_transaction_isolation") == "read committed");
  CHECK(pg::DefaultIsReadCommitted(conn.get()));
}

// What a proxy that drops the startup options would leave: another default.
// The statement then runs in BEGIN ISOLATION LEVEL READ COMMITTED..COMMIT,
// not in an implicit transaction at the session's default.
TEST_CASE(
    "a statement in a transaction of its own runs READ COMMITTED whatever "
    "the session's default") {
  const bool other_default = GENERATE(false, true);
  INFO("serializable default " << other_default);
  pg::ConnPtr conn =
      pg::Connect(pg::ParseConninfo("", "test"), {}, "connection_test", "test");
  if (other_default) {
    PQclear(PQexec(conn.get(),
                   "SET default_transaction_isolation = 'serializable'"));
  }
  pg::Connection connection(std::move(conn), true);
  CHECK(connection.session().read_committed_default == !other_default);
  // With or without the flush request before the commit (the result
  // comes first, or with the commit): libpq's trace of what it sent shows
  // a Flush message only for the first.
  const pg::ResultFirst first =
      GENERATE(pg::ResultFirst::kYes, pg::ResultFirst::kNo);
  pg_conn* raw = connection.session().conn;
  char* trace_text = nullptr;
  std::size_t trace_size = 0;
  FILE* trace = open_memstream(&trace_text, &trace_size);
  REQUIRE(trace != nullptr);
  PQtrace(raw, trace);
  PQsetTraceFlags(raw, PQTRACE_SUPPRESS_TIMESTAMPS);
  pg::CommittedExec done = pg::ExecCommitted(
      connection.session(), "test",
      {"SELECT pg_catalog.current_setting('transaction_isolation')", {}},
      first);
  PQuntrace(raw);
  std::fclose(trace);
  const std::string sent(trace_text, trace_size);
  std::free(trace_text);
  CHECK(sent.find("\tSync") != std::string::npos);  // the trace works
  CHECK((sent.find("\tFlush") != std::string::npos) ==
        (first == pg::ResultFirst::kYes));
  CHECK_FALSE(done.in_doubt);
  REQUIRE(done.rows != nullptr);
  CHECK(std::string(PQgetvalue(done.rows.get(), 0, 0)) == "read committed");
}
