// Every other database role is untrusted (doc/security.md): objects it
// plants on the search path must never run inside the library's sessions.
// test/support/traps.sql plants look-alikes of the functions and operators
// our SQL uses, in a schema the database's search_path puts before
// pg_catalog and in public, each counting its calls in public.trap_hits.
#include <catch2/catch.hpp>
#include <fstream>
#include <sstream>
#include <thread>

#include "live_db.hpp"

using namespace compaction;
using namespace testing;
using namespace std::chrono_literals;

namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  REQUIRE(in.good());
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// A database of its own (the traps would hijack every other test's SQL in
// a shared one), with the traps planted; dropped at the end.
class TrapDb {
 public:
  TrapDb() : name_(Unique("traps_")) {
    RawConn admin;
    admin.Query("CREATE DATABASE " + name_);
    RawConn db(conninfo());
    REQUIRE(db.TryExec(ReadFile(COMPACTION_TRAPS_SQL)).empty());
  }
  ~TrapDb() {
    RawConn admin;
    admin.TryExec("DROP DATABASE IF EXISTS " + name_ + " WITH (FORCE)");
  }
  std::string conninfo() const { return "dbname=" + name_; }
  // Trap calls so far (a sequence: rolled-back calls count too).
  std::int64_t Hits() const {
    RawConn db(conninfo());
    return db.Int(
        "SELECT CASE WHEN is_called THEN last_value ELSE 0 END "
        "FROM public.trap_hits");
  }

 private:
  std::string name_;
};

// Everything the library sends: schema install, registration, every kind
// of produce and read, the lock loop (insert, relock, materialized, with a
// lock timeout), stats on the exact and the estimate path, a sweep that
// deletes, and a destroy.
void ExerciseLibrary(Client& client) {
  client.InstallSchema();
  auto topic = client.Topic<Counter>("trapped");
  topic.Register(testing::Ttl(1ms));
  auto producer = topic.RegisterProducer();
  producer.Produce(Counter{1}, {});
  producer.Produce(Counter{2}, {"plain", std::nullopt});
  producer.Produce(Counter{3}, Compacted("k", 5));
  producer.Produce(Counter{4}, Compacted("k", 1));  // loses the winner rule
  for (const char* key : {"headless-1", "headless-2", "headless-1"}) {
    client.InTransaction(
        [&](Tx& tx) { topic.Key(key).LockCompactionHead(tx); });
  }
  client.InTransaction([&](Tx& tx) {
    auto head = topic.Key("k").LockCompactionHead(tx, LockOptions{2s});
    REQUIRE(head);
    producer.ProduceInTx(tx, Counter{head->message.value + 1},
                         Compacted("k", 6));
  });
  // Seen with a head: locked the seed's way (lock.cpp).
  client.InTransaction(
      [&](Tx& tx) { REQUIRE(topic.Key("k").LockCompactionHead(tx)); });
  CHECK(topic.Key("k").CompactionHead()->message.value == 4);
  CHECK(topic.ListCompactionHeads().size() == 1);
  CHECK(topic.Key("k").Messages(10).size() == 3);
  CHECK(topic.Stats().headless_rows == 2);
  StatsOptions capped;
  capped.exact_count_limit = 1;
  CHECK(topic.Stats(capped).headless_rows_estimated);
  CHECK(client.ListTopicStats().size() == 1);
  std::this_thread::sleep_for(20ms);  // past the 1 ms TTL
  Janitor janitor(client);
  CHECK(janitor.SweepHeadless("trapped").deleted == 2);
  topic.Destroy();
}

}  // namespace

TEST_CASE(
    "functions and operators planted on the search path never run in "
    "the library's sessions") {
  // Also as behind a transaction pooler: no startup `options`, the
  // settings applied per transaction, and statements sent unnamed (through
  // a real pooler, the tests' options already say so).
  const bool pooler_mode = GENERATE(false, true);
  INFO("pooler mode " << pooler_mode);
  TrapDb traps;
  // The traps are armed: an ordinary session of that database calls one.
  RawConn victim(traps.conninfo());
  CHECK(victim.TryExec("SELECT now()") == "P0001");
  CHECK(victim.TryExec(
            "SELECT pg_catalog.now() - 1::bigint * interval '1 s'") == "P0001");
  const std::int64_t armed = traps.Hits();
  REQUIRE(armed == 2);

  ClientOptions options = ClientOptionsForTests();
  options.schema = Unique("s_");
  if (pooler_mode) options.prepared_statements = false;
  Client client = Client::Connect(ClientConninfo(traps.conninfo()), options);
  ExerciseLibrary(client);
  CHECK(traps.Hits() == armed);
}

// lock_<id> has no SET search_path clause (a GUC save and restore per call,
// sql/topic_v1.sql): it relies on qualifying everything in its body. A
// caller outside the library, under the database's hostile search_path,
// runs no planted object through it, in any state of the key.
TEST_CASE("lock_<id> called under a hostile search_path runs no trap") {
  TrapDb traps;
  ClientOptions options = ClientOptionsForTests();
  options.schema = Unique("s_");
  Client client = Client::Connect(ClientConninfo(traps.conninfo()), options);
  client.InstallSchema();
  auto topic = client.Topic<Counter>("called");
  const std::int64_t id = topic.Register().id;
  topic.RegisterProducer().Produce(Counter{1}, Compacted("head"));
  client.InTransaction(
      [&](Tx& tx) { topic.Key("headless").LockCompactionHead(tx); });
  const std::int64_t armed = traps.Hits();
  RawConn victim(traps.conninfo());
  REQUIRE(victim.Value("SELECT pg_catalog.current_setting('search_path')") ==
          "evil, public, pg_catalog");
  const std::string call = "SELECT m.status FROM " + options.schema + ".lock_" +
                           std::to_string(id) + "($1, false) m";
  for (const char* key : {"new", "headless", "head"}) {
    INFO(key);
    victim.Query("BEGIN");
    CHECK(victim.Value(call, {std::string(key)}) ==
          (std::string(key) == "head" ? "h" : "e"));
    victim.Query("COMMIT");
  }
  // The guarded check reads lock_timeout through the qualified name too.
  victim.Query("BEGIN");
  victim.Query("SET LOCAL lock_timeout = '1s'");
  CHECK(victim.Value(call, {std::string("head")}) == "g");
  victim.Query("COMMIT");
  CHECK(traps.Hits() == armed);
}
