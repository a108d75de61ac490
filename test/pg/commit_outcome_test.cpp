// COMMIT outcomes resolved on a new connection when the backend is
// terminated during COMMIT (doc/poolers-and-failover.md). COMMIT is held inside
// the server by a deferred constraint trigger that waits on an advisory
// lock the test holds, so the backend is terminated while it provably has
// not committed; the committed-then-terminated case needs a synchronous
// standby and lives in test/failover.
#include <libpq-fe.h>

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

// A client of its own (application_name `app`) on the test's schema. With
// `prepared_statements` false it runs as behind a transaction pooler: an
// autocommit produce is BEGIN..COMMIT instead of an implicit transaction.
compaction::Client ClientNamed(
    LiveDb& db, const std::string& app, bool prepared_statements = true,
    std::chrono::milliseconds check_timeout = std::chrono::seconds(10)) {
  compaction::ClientOptions options;
  options.schema = db.schema();
  options.application_name = app;
  options.commit_check_timeout = check_timeout;
  options.prepared_statements = prepared_statements;
  options.pool_size = 1;
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
  // COMMITs after it through. True when it terminated it. (An autocommit
  // produce commits at its pipeline's sync with no COMMIT statement, so
  // pg_stat_activity shows the INSERT: the wait on the advisory lock is
  // what says it is committing.)
  bool TerminateWaiting(RawConn& raw, const std::string& app) {
    const bool terminated = testing::TerminateWhen(
        raw, app, "wait_event_type = 'Lock' AND wait_event = 'advisory'");
    holder_.Query("SELECT pg_advisory_unlock($1)", {std::to_string(key_)});
    return terminated;
  }

 private:
  std::int64_t key_;
  RawConn holder_;
};

}  // namespace

// With the check off (commit_check_timeout 0) the produce asks for no
// result ahead of its commit, and a broken commit says the check is off.
TEST_CASE(
    "an autocommit produce terminated during COMMIT is ConnectionLost and did "
    "not commit, or CommitOutcomeUnknown with the check off") {
  // The implicit transaction, and BEGIN..COMMIT as behind a pooler.
  const bool prepared = GENERATE(true, false);
  const bool check = GENERATE(true, false);
  INFO("prepared statements " << prepared << ", commit check " << check);
  LiveDb db;
  const std::string app = testing::Unique("co_produce");
  compaction::Client client =
      ClientNamed(db, app, prepared,
                  check ? std::chrono::seconds(10) : std::chrono::seconds(0));
  auto topic = client.Topic<Counter>("held");
  topic.Register();
  auto producer = topic.RegisterProducer();
  CommitHold hold(db, db.MessageTable("held"));
  auto produce = std::async(std::launch::async, [&] {
    return producer.Produce(Counter{1}, Compacted("k"));
  });
  REQUIRE(hold.TerminateWaiting(db.raw(), app));
  try {
    produce.get();
    FAIL("the produce returned");
  } catch (const ConnectionLost& e) {
    // Found out on a new connection, not taken from the broken one's error.
    CHECK(check);
    CHECK_THAT(e.what(), Catch::Contains("checked on a new connection"));
  } catch (const CommitOutcomeUnknown& e) {
    CHECK_FALSE(check);
    CHECK_THAT(e.what(), Catch::Contains("commit check disabled"));
  }
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

// The caller's own statements on native_handle() may roll back to a
// savepoint and undo the message the library would look for while the
// rest of the transaction commits: its absence then proves nothing, so a
// broken COMMIT is CommitOutcomeUnknown, never "safe to retry" (a retry
// would write the first message again). Here the COMMIT provably did not
// commit, which the library can no longer tell.
TEST_CASE(
    "after statements on native_handle() an absent message proves nothing") {
  LiveDb db;
  const std::string app = testing::Unique("co_native");
  compaction::Client client = ClientNamed(db, app);
  auto topic = client.Topic<Counter>("held");
  topic.Register();
  auto producer = topic.RegisterProducer();
  CommitHold hold(db, db.MessageTable("held"));
  Tx tx = client.Begin();
  producer.ProduceInTx(tx, Counter{1}, Compacted("a"));
  PQclear(PQexec(tx.native_handle(), "SAVEPOINT s"));
  producer.ProduceInTx(tx, Counter{2}, Compacted("b"));
  PGresult* undone = PQexec(tx.native_handle(), "ROLLBACK TO SAVEPOINT s");
  REQUIRE(PQresultStatus(undone) == PGRES_COMMAND_OK);
  PQclear(undone);
  auto commit = std::async(std::launch::async, [&] { tx.Commit(); });
  REQUIRE(hold.TerminateWaiting(db.raw(), app));
  try {
    commit.get();
    FAIL("the commit returned");
  } catch (const CommitOutcomeUnknown& e) {
    CHECK_THAT(e.what(), Catch::Contains("native_handle()"));
  }
  CHECK(tx.status() == TxStatus::kInDoubt);
}

// Update sends its produce and COMMIT in one round trip; the produce's
// result comes back before COMMIT runs, so a broken COMMIT is resolved by
// looking for that message, and Update retries what provably did not
// commit.
TEST_CASE(
    "an Update terminated during COMMIT is found not committed and retried") {
  LiveDb db;
  const std::string app = testing::Unique("co_update");
  compaction::Client client = ClientNamed(db, app);
  auto topic = client.Topic<Counter>("held");
  topic.Register();
  CommitHold hold(db, db.MessageTable("held"));
  std::vector<std::string> retried;
  compaction::UpdateOptions options;
  options.on_retry = [&](const compaction::Error& e, int) {
    retried.push_back(e.what());
  };
  auto update = std::async(std::launch::async, [&] {
    return topic.Key("k").Update(
        [](const std::optional<Counter>& current) {
          return std::optional<Counter>(
              Counter{current ? current->value + 1 : 1});
        },
        options);
  });
  REQUIRE(hold.TerminateWaiting(db.raw(), app));
  auto head = update.get();
  REQUIRE(head.has_value());
  CHECK(head->message.value == 1);
  REQUIRE(retried.size() == 1);
  CHECK_THAT(retried[0], Catch::Contains("checked on a new connection"));
  CHECK(db.raw().Int("SELECT count(*) FROM " + db.MessageTable("held")) == 1);
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

TEST_CASE(
    "an autocommit produce whose commit the server refuses throws its error "
    "and stores nothing") {
  LiveDb db;
  const bool prepared = GENERATE(true, false);
  INFO("prepared statements " << prepared);
  compaction::Client client =
      ClientNamed(db, testing::Unique("co_refused"), prepared);
  auto topic = client.Topic<Counter>("refused");
  topic.Register();
  auto producer = topic.RegisterProducer();
  producer.Produce(Counter{1}, Compacted("k"));
  const auto backend = [&] {  // of the client's only pooled connection
    Tx tx = client.Begin();
    return PQbackendPID(tx.native_handle());
  };
  const int pid = backend();
  // A deferred constraint trigger that refuses every commit from now on.
  const std::string fn = db.QuotedSchema() + ".refuse_commit";
  db.raw().Query("CREATE FUNCTION " + fn +
                 "() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN "
                 "RAISE EXCEPTION 'refused at commit' USING ERRCODE = "
                 "'23514'; END$$");
  db.raw().Query("CREATE CONSTRAINT TRIGGER refuse_commit AFTER INSERT ON " +
                 db.MessageTable("refused") +
                 " DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE "
                 "FUNCTION " +
                 fn + "()");
  CHECK_THROWS_WITH(producer.Produce(Counter{2}, Compacted("k")),
                    Catch::Contains("refused at commit"));
  CHECK(db.raw().Int("SELECT count(*) FROM " + db.MessageTable("refused")) ==
        1);
  CHECK(topic.Key("k").CompactionHead()->message.value == 1);
  // The connection went back to the pool clean (not discarded), and the
  // next produce works.
  CHECK(backend() == pid);
  db.raw().Query("DROP TRIGGER refuse_commit ON " + db.MessageTable("refused"));
  producer.Produce(Counter{3}, Compacted("k"));
  CHECK(topic.Key("k").CompactionHead()->message.value == 3);
}

// An autocommit produce is an implicit transaction at the connection's
// default isolation, which the library pins to READ COMMITTED: under
// REPEATABLE READ or SERIALIZABLE a produce that waited for another
// transaction's update of the key's head would fail with 40001.
TEST_CASE(
    "an autocommit produce runs READ COMMITTED whatever isolation the "
    "conninfo asks for") {
  LiveDb db;
  compaction::ClientOptions options;
  options.schema = db.schema();
  auto client = compaction::Client::Connect(
      "options='-c default_transaction_isolation=serializable'", options);
  auto topic = client.Topic<Counter>("iso");
  topic.Register();
  auto producer = topic.RegisterProducer();
  producer.Produce(Counter{1}, Compacted("k"));
  // Another transaction updates the head row and holds it...
  RawConn other;
  other.Query("BEGIN");
  other.Query("UPDATE " + db.HeadTable("iso") +
              " SET updated_at = updated_at WHERE message_key = 'k'");
  auto produce = std::async(std::launch::async, [&] {
    return producer.Produce(Counter{2}, Compacted("k"));
  });
  // ...until the produce waits for it, then commits.
  REQUIRE(
      testing::WaitForLockWait(db.raw(), "compaction:Produce", db.schema()));
  other.Query("COMMIT");
  CHECK(produce.get().head_advanced);
  CHECK(topic.Key("k").CompactionHead()->message.value == 2);
}
