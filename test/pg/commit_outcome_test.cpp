// COMMIT outcomes resolved on a new connection when the backend is
// terminated during COMMIT (DESIGN.md section 10). COMMIT is held inside
// the server by a deferred constraint trigger that waits on an advisory
// lock the test holds, so the backend is terminated while it provably has
// not committed; the committed-then-terminated case needs a synchronous
// standby and lives in test/failover.
#include <catch2/catch.hpp>
#include <future>
#include <random>
#include <string>

#include "db_helpers.hpp"
#include "live_db.hpp"

using compaction::CommitOutcomeUnknown;
using compaction::ConnectionLost;
using compaction::Tx;
using compaction::TxStatus;
using testing::Compacted;
using testing::Counter;
using testing::LiveDb;
using testing::RawConn;

namespace {

// A client of its own (application_name `app`) on the test's schema.
compaction::Client ClientNamed(LiveDb& db, const std::string& app) {
  compaction::ClientOptions options;
  options.schema = db.schema();
  options.application_name = app;
  options.commit_check_timeout = std::chrono::seconds(10);
  return compaction::Client::Connect("", options);
}

std::int64_t RandomKey() {
  static std::mt19937_64 engine{std::random_device{}()};
  return static_cast<std::int64_t>(engine() >> 2);
}

// Holds every COMMIT of a transaction that inserted into `table`: a
// deferred constraint trigger runs at COMMIT and waits for an advisory lock
// this object holds until TerminateWaiting().
class CommitHold {
 public:
  CommitHold(LiveDb& db, const std::string& table) : key_(RandomKey()) {
    const std::string fn = db.QuotedSchema() + ".hold_commit";
    db.raw().Query("CREATE OR REPLACE FUNCTION " + fn +
                   "() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN "
                   "PERFORM pg_catalog.pg_advisory_xact_lock(" +
                   std::to_string(key_) + "); RETURN NULL; END$$");
    db.raw().Query("CREATE CONSTRAINT TRIGGER hold_commit AFTER INSERT ON " +
                   table +
                   " DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE "
                   "FUNCTION " +
                   fn + "()");
    holder_.Query("SELECT pg_advisory_lock($1)", {std::to_string(key_)});
  }

  // Terminates `app`'s backend once its COMMIT waits here, then lets the
  // COMMITs after it through. True when it terminated it.
  bool TerminateWaiting(RawConn& raw, const std::string& app) {
    const bool terminated = testing::TerminateWhen(
        raw, app, "wait_event_type = 'Lock' AND query = 'COMMIT'");
    holder_.Query("SELECT pg_advisory_unlock($1)", {std::to_string(key_)});
    return terminated;
  }

 private:
  std::int64_t key_;
  RawConn holder_;
};

}  // namespace

TEST_CASE(
    "an autocommit produce terminated during COMMIT is ConnectionLost, and did "
    "not commit") {
  LiveDb db;
  const std::string app = testing::Unique("co_produce");
  compaction::Client client = ClientNamed(db, app);
  auto topic = client.Topic<Counter>("held");
  topic.Register();
  auto producer = topic.RegisterProducer();
  CommitHold hold(db, db.MessageTable("held"));
  auto produce = std::async(std::launch::async, [&] {
    return producer.Produce(Counter{1}, Compacted("k"));
  });
  REQUIRE(hold.TerminateWaiting(db.raw(), app));
  CHECK_THROWS_AS(produce.get(), ConnectionLost);
  CHECK(db.raw().Int("SELECT count(*) FROM " + db.MessageTable("held")) == 0);
  // Safe to retry: the retry is the only copy.
  producer.Produce(Counter{2}, Compacted("k"));
  CHECK(db.raw().Int("SELECT count(*) FROM " + db.MessageTable("held")) == 1);
  CHECK(topic.Key("k").CompactionHead()->message.value == 2);
}

TEST_CASE(
    "a Tx with a produce terminated during COMMIT is ConnectionLost and "
    "aborted") {
  LiveDb db;
  const std::string app = testing::Unique("co_tx");
  compaction::Client client = ClientNamed(db, app);
  auto topic = client.Topic<Counter>("held");
  topic.Register();
  auto producer = topic.RegisterProducer();
  CommitHold hold(db, db.MessageTable("held"));
  Tx tx = client.Begin();
  CHECK_FALSE(topic.Key("k").LockCompactionHead(tx).has_value());
  producer.ProduceInTx(tx, Counter{1}, Compacted("k"));
  auto commit = std::async(std::launch::async, [&] { tx.Commit(); });
  REQUIRE(hold.TerminateWaiting(db.raw(), app));
  CHECK_THROWS_AS(commit.get(), ConnectionLost);
  CHECK(tx.status() == TxStatus::kAborted);
  CHECK(db.raw().Int("SELECT count(*) FROM " + db.MessageTable("held")) == 0);
}

TEST_CASE(
    "a lock-only Tx terminated during COMMIT stays CommitOutcomeUnknown") {
  LiveDb db;
  const std::string app = testing::Unique("co_lock");
  compaction::Client client = ClientNamed(db, app);
  auto topic = client.Topic<Counter>("held");
  topic.Register();
  // The lock inserts the key's (headless) row: hold COMMITs on that table.
  CommitHold hold(db, db.HeadTable("held"));
  Tx tx = client.Begin();
  CHECK_FALSE(topic.Key("k").LockCompactionHead(tx).has_value());
  auto commit = std::async(std::launch::async, [&] { tx.Commit(); });
  REQUIRE(hold.TerminateWaiting(db.raw(), app));
  // Nothing the library wrote to look for: it cannot tell.
  CHECK_THROWS_AS(commit.get(), CommitOutcomeUnknown);
  CHECK(tx.status() == TxStatus::kInDoubt);
}
