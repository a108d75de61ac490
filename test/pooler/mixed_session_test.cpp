// Prepared statements ON through PgBouncer in transaction mode with one
// server connection (run by test/pooler/with_pooler.sh with
// PGBOUNCER_POOL_SIZE=1): two clients share that server connection, and a
// client's statement names can meet a server connection that never saw
// them. That must be an error naming ClientOptions::prepared_statements,
// never the execution of a statement another client prepared under the
// same name (what a per-connection counter as the name did).
#include <libpq-fe.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <string>
#include <thread>

#include "live_db.hpp"

using namespace compaction;
using namespace testing;
using namespace std::chrono_literals;

namespace {

// A database of its own, so that every backend of it but the observer's
// is a server connection of the pooler.
class PooledDb {
 public:
  PooledDb() : name_(Unique("mixed_")) {
    admin_.Query("CREATE DATABASE " + name_);
  }
  ~PooledDb() {
    admin_.TryExec("DROP DATABASE IF EXISTS " + name_ + " WITH (FORCE)");
  }
  const std::string& name() const { return name_; }

  // Ends the pooler's server connections to the database and waits until
  // PgBouncer has dropped them, so the next transaction gets a new one.
  void EndServerConnections() {
    admin_.Query(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
        "WHERE datname = $1 AND pid <> pg_backend_pid()",
        {name_});
    REQUIRE(WaitUntilNoServers());
  }

 private:
  bool WaitUntilNoServers() {
    // The admin console speaks the simple query protocol only.
    RawConn console(ClientConninfo("dbname=pgbouncer"));
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (std::chrono::steady_clock::now() < deadline) {
      PGresult* r = PQexec(console.get(), "SHOW SERVERS");
      REQUIRE(PQresultStatus(r) == PGRES_TUPLES_OK);
      const int column = PQfnumber(r, "database");
      int ours = 0;
      for (int i = 0; i < PQntuples(r); ++i) {
        if (name_ == PQgetvalue(r, i, column)) ++ours;
      }
      PQclear(r);
      if (ours == 0) return true;
      std::this_thread::sleep_for(10ms);
    }
    return false;
  }

  std::string name_;
  RawConn admin_;  // the cluster itself, not the pooler
};

}  // namespace

TEST_CASE(
    "prepared statements through a transaction pooler: a mixed-up "
    "session is an error, never another client's statement") {
  REQUIRE(ThroughPooler());
  PooledDb db;
  ClientOptions options;
  options.prepared_statements = true;
  options.pool_size = 1;
  options.schema = "mixed";
  Client a = Client::Connect(ClientConninfo("dbname=" + db.name()), options);
  a.InstallSchema();
  // B: a schema of its own, installed by the same calls.
  options.schema = "mixed_b";
  Client b = Client::Connect(ClientConninfo("dbname=" + db.name()), options);

  // A prepares its statements on the one server connection.
  auto topic_a = a.Topic<Counter>("a");
  topic_a.Register();
  auto producer_a = topic_a.RegisterProducer();
  producer_a.Produce(Counter{7}, Compacted("k"));
  REQUIRE(topic_a.Key("k").CompactionHead()->message.value == 7);

  // A new server connection; B runs the same calls on it first, in the
  // same order, on a topic of its own (a per-connection counter would hand
  // out A's names for B's statements).
  db.EndServerConnections();
  b.InstallSchema();
  auto topic_b = b.Topic<Counter>("b");
  topic_b.Register();
  auto producer_b = topic_b.RegisterProducer();
  producer_b.Produce(Counter{1}, Compacted("k"));
  REQUIRE(topic_b.Key("k").CompactionHead()->message.value == 1);

  // A's names do not exist there: an error with the hint, whatever B
  // prepared.
  try {
    auto head = topic_a.Key("k").CompactionHead();
    FAIL("read through a session that never prepared it: "
         << (head ? std::to_string(head->message.value) : "no head"));
  } catch (const DatabaseError& e) {
    CHECK(e.sqlstate() == "26000");
    CHECK_THAT(e.what(), Catch::Contains("prepared_statements = false"));
  }
  // B's session was not disturbed.
  CHECK(topic_b.Key("k").CompactionHead()->message.value == 1);
}
