// With prepared_statements = false the library sends no startup `options`
// (a transaction pooler refuses or drops them) and applies their settings
// in every transaction instead: the search_path pin, the caller's -c
// settings and ClientOptions::session_settings (the daemon's
// statement_timeout for its stats queries).
// Directly and, under test/pooler/with_pooler.sh, through PgBouncer in
// transaction mode, where a session setting would not hold.
#include <libpq-fe.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <string>

#include "live_db.hpp"

using namespace compaction;
using namespace testing;
using namespace std::chrono_literals;

namespace {

// A client of `db`'s schema, unnamed statements, with `options`.
Client PoolerModeClient(LiveDb& db, const std::string& options) {
  ClientOptions client_options;
  client_options.schema = db.schema();
  client_options.prepared_statements = false;
  client_options.pool_size = 2;
  return Client::Connect(ClientConninfo("options='" + options + "'"),
                         client_options);
}

std::string Show(Tx& tx, const char* setting) {
  PGresult* r =
      PQexec(tx.native_handle(), (std::string("SHOW ") + setting).c_str());
  REQUIRE(PQresultStatus(r) == PGRES_TUPLES_OK);
  std::string value = PQgetvalue(r, 0, 0);
  PQclear(r);
  return value;
}

// Holds an ACCESS EXCLUSIVE lock on `table` on a direct connection, so any
// statement of ours that reads it waits; the server ends the holder after
// 20 s idle, so code that ignores its timeout fails slowly instead of
// hanging.
class TableLock {
 public:
  explicit TableLock(const std::string& table) {
    holder_.Query("SET idle_in_transaction_session_timeout = '20s'");
    holder_.Query("BEGIN");
    holder_.Query("LOCK TABLE " + table + " IN ACCESS EXCLUSIVE MODE");
  }

 private:
  RawConn holder_;
};

template <class F>
std::chrono::milliseconds Timed(F&& body) {
  const auto start = std::chrono::steady_clock::now();
  body();
  return std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - start);
}

}  // namespace

TEST_CASE(
    "prepared_statements = false: the startup settings hold in every "
    "transaction") {
  LiveDb db;
  Client client = PoolerModeClient(db, "-c statement_timeout=4321");
  for (int i = 0; i < 3; ++i) {
    client.InTransaction([&](Tx& tx) {
      // As set_config stores it (a startup option would read
      // "pg_catalog, pg_temp").
      CHECK(Show(tx, "search_path") == "pg_catalog,pg_temp");
      CHECK(Show(tx, "statement_timeout") == "4321ms");
    });
  }
}

TEST_CASE(
    "prepared_statements = false: options other than -c settings are "
    "refused at Connect") {
  ClientOptions options;
  options.prepared_statements = false;
  CHECK_THROWS_AS(Client::Connect(ClientConninfo("options='-d 5'"), options),
                  InvalidArgument);
}

TEST_CASE(
    "prepared_statements = false: a statement that outlives the "
    "connection's statement_timeout is cancelled") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>(Unique("slow_"));
  topic.Register();
  Client client = PoolerModeClient(db, "-c statement_timeout=300");
  auto slow = client.Topic<Counter>(topic.name());
  slow.Stats();  // the topic is known: only the stats query waits below
  TableLock lock(db.HeadTable(topic.name()));

  // Autocommit (the stats script) and a transaction (BEGIN, then the lock
  // loop): each is cancelled after 300 ms instead of waiting 20 s.
  std::chrono::milliseconds took =
      Timed([&] { CHECK_THROWS_AS(slow.Stats(), StatementCancelled); });
  CHECK(took < 5s);
  took = Timed([&] {
    CHECK_THROWS_AS(client.InTransaction(
                        [&](Tx& tx) { slow.Key("k").LockCompactionHead(tx); }),
                    StatementCancelled);
  });
  CHECK(took < 5s);
}

// ClientOptions::session_settings: in the startup options with prepared
// statements, per transaction without; either way over the conninfo's
// options of the same name, and those options' other settings still hold.
// Through the test PgBouncer only without prepared statements (with them
// the startup options go to a pooler that drops them).
TEST_CASE("session_settings hold in every transaction, over the conninfo's") {
  const bool prepared = GENERATE(false, true);
  if (prepared && ThroughPooler()) return;
  CAPTURE(prepared);
  LiveDb db;
  ClientOptions options;
  options.schema = db.schema();
  options.prepared_statements = prepared;
  options.pool_size = 2;
  options.session_settings = {{"statement_timeout", "4321"},
                              {"compaction_test.note", "a b\\c\t-c x=y"}};
  Client client = Client::Connect(
      ClientConninfo("options='-c statement_timeout=1 -c work_mem=7MB "
                     "-c search_path=public'"),
      options);
  for (int i = 0; i < 3; ++i) {
    client.InTransaction([&](Tx& tx) {
      CHECK(Show(tx, "statement_timeout") == "4321ms");
      CHECK(Show(tx, "compaction_test.note") == "a b\\c\t-c x=y");
      CHECK(Show(tx, "work_mem") == "7MB");
      CHECK(Show(tx, "search_path").find("public") == std::string::npos);
    });
  }
  client.Topic<Counter>("t").Register();  // autocommit statements run too
}

TEST_CASE("a session setting is refused before anything connects") {
  ClientOptions options;
  options.session_settings = {{"statement_timeout; DROP", "1"}};
  // Nothing listens there: a connection attempt would be ConnectionLost.
  const std::string nowhere = "host=/nonexistent/socket/dir port=1";
  try {
    Client::Connect(nowhere, options);
    FAIL("no exception");
  } catch (const InvalidArgument& e) {
    CHECK(std::string(e.what()).find("statement_timeout; DROP") !=
          std::string::npos);
  }
  options.session_settings = {{"search_path", "public"}};
  CHECK_THROWS_AS(Client::Connect(nowhere, options), InvalidArgument);
}

TEST_CASE(
    "prepared_statements = false: a statement outliving the "
    "statement_timeout of session_settings is cancelled") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>(Unique("slow_"));
  topic.Register();
  ClientOptions options;
  options.schema = db.schema();
  options.prepared_statements = false;
  options.pool_size = 2;
  options.session_settings = {{"statement_timeout", "300"}};
  Client client = Client::Connect(ClientConninfo(), options);
  auto slow = client.Topic<Counter>(topic.name());
  slow.Stats();
  TableLock lock(db.HeadTable(topic.name()));
  const std::chrono::milliseconds took =
      Timed([&] { CHECK_THROWS_AS(slow.Stats(), StatementCancelled); });
  CHECK(took < 5s);
}

// The settings of a transaction that starts with BEGIN ISOLATION LEVEL go
// after the BEGIN: a SELECT before it would take the snapshot that an
// isolation level other than the default must come before. Tagged [direct]:
// it logs in as a role of its own, which the test PgBouncer (one user) does
// not let through; the statements it checks are the same either way.
TEST_CASE(
    "prepared_statements = false: transactions start where the server's "
    "default isolation is not READ COMMITTED",
    "[direct]") {
  LiveDb db;
  const std::string role = Unique("serializable_");
  db.raw().Query("CREATE ROLE \"" + role + "\" LOGIN SUPERUSER");
  db.raw().Query("ALTER ROLE \"" + role +
                 "\" SET default_transaction_isolation = 'serializable'");
  {
    ClientOptions options;
    options.schema = db.schema();
    options.prepared_statements = false;
    options.pool_size = 1;
    Client client = Client::Connect(ClientConninfo("user=" + role), options);
    auto topic = client.Topic<Counter>("iso");
    topic.Register();
    auto producer = topic.RegisterProducer();
    client.InTransaction([&](Tx& tx) {
      CHECK(Show(tx, "transaction_isolation") == "read committed");
      CHECK(Show(tx, "search_path") == "pg_catalog,pg_temp");
      topic.Key("k").LockCompactionHead(tx);
      producer.ProduceInTx(tx, Counter{1}, Compacted("k"));
    });
    producer.Produce(Counter{2}, Compacted("k"));
    CHECK(topic.Key("k").CompactionHead()->message.value == 2);
  }
  db.raw().Query("DROP ROLE \"" + role + "\"");
}
