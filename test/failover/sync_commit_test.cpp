// Committed, then terminated: the backend is terminated while its COMMIT
// waits for the synchronous standby, after the commit record (the server
// warns "the transaction has already committed locally"). Needs the pair
// of deploy/local/standby.sh (PG* on the primary, FAILOVER_STANDBY_HOST and
// FAILOVER_P2): replay is paused on the standby and the client asks for
// synchronous_commit = remote_apply, so its COMMIT waits (SyncRep) until
// the test ends the backend. The library must find the message on a new
// connection and return normally.
#include <catch2/catch.hpp>
#include <cstdlib>
#include <future>
#include <mutex>
#include <string>

#include "db_helpers.hpp"
#include "live_db.hpp"

using compaction::Tx;
using testing::Compacted;
using testing::Counter;
using testing::LiveDb;
using testing::RawConn;

namespace {

std::string Env(const char* name) {
  const char* value = std::getenv(name);
  REQUIRE(value != nullptr);
  return value;
}

// Pauses WAL replay on the standby while it lives.
class ReplayPause {
 public:
  ReplayPause()
      : standby_("host=" + Env("FAILOVER_STANDBY_HOST") +
                 " port=" + Env("FAILOVER_P2")) {
    standby_.Query("SELECT pg_wal_replay_pause()");
  }
  ~ReplayPause() { standby_.Query("SELECT pg_wal_replay_resume()"); }

 private:
  RawConn standby_;
};

struct Warnings {
  std::mutex mutex;
  std::vector<std::string> seen;
};

compaction::Client SyncClient(LiveDb& db, const std::string& app,
                              Warnings& warnings) {
  compaction::ClientOptions options;
  options.schema = db.schema();
  options.application_name = app;
  options.notice_handler = [&warnings](const compaction::Notice& n) {
    std::lock_guard lock(warnings.mutex);
    warnings.seen.push_back(n.severity + " " + n.message);
  };
  return compaction::Client::Connect(
      "options='-c synchronous_commit=remote_apply'", options);
}

// Terminates `app`'s backend once its COMMIT waits for the standby.
bool TerminateInSyncRep(RawConn& raw, const std::string& app) {
  return testing::TerminateWhen(raw, app, "wait_event = 'SyncRep'");
}

}  // namespace

TEST_CASE(
    "an autocommit produce terminated after its commit record returns "
    "normally") {
  LiveDb db;
  Warnings warnings;
  const std::string app = testing::Unique("sync_produce");
  compaction::Client client = SyncClient(db, app, warnings);
  auto topic = client.Topic<Counter>("synced");
  topic.Register();
  auto producer = topic.RegisterProducer();
  compaction::ProduceResult result;
  {
    ReplayPause pause;
    auto produce = std::async(std::launch::async, [&] {
      return producer.Produce(Counter{7}, Compacted("k"));
    });
    REQUIRE(TerminateInSyncRep(db.raw(), app));
    REQUIRE_NOTHROW(result = produce.get());
  }
  CHECK(db.raw().Int("SELECT count(*) FROM " + db.MessageTable("synced") +
                         " WHERE id = $1",
                     {std::to_string(result.id)}) == 1);
  CHECK(topic.Key("k").CompactionHead()->message.value == 7);
  std::lock_guard lock(warnings.mutex);
  bool warned = false;
  for (const auto& w : warnings.seen) {
    warned = warned || w.find("synchronous replication") != std::string::npos;
  }
  CHECK(warned);  // the server's warning reached the hook
}

TEST_CASE("a Tx terminated after its commit record commits") {
  LiveDb db;
  Warnings warnings;
  const std::string app = testing::Unique("sync_tx");
  compaction::Client client = SyncClient(db, app, warnings);
  auto topic = client.Topic<Counter>("synced");
  topic.Register();
  auto producer = topic.RegisterProducer();
  Tx tx = client.Begin();
  {
    ReplayPause pause;
    CHECK_FALSE(topic.Key("k").LockCompactionHead(tx).has_value());
    producer.ProduceInTx(tx, Counter{1}, Compacted("k"));
    auto commit = std::async(std::launch::async, [&] { tx.Commit(); });
    REQUIRE(TerminateInSyncRep(db.raw(), app));
    REQUIRE_NOTHROW(commit.get());
  }
  CHECK(tx.status() == compaction::TxStatus::kCommitted);
  CHECK(topic.Key("k").CompactionHead()->message.value == 1);
}
