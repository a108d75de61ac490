// Transactions: InTransaction, Begin, and borrowed caller transactions.
#include <catch2/catch.hpp>

#include "live_db.hpp"

using compaction::CompactionOptions;
using compaction::ProduceOptions;
using compaction::Tx;
using testing::Compacted;
using testing::Counter;
using testing::LiveDb;

TEST_CASE("InTransaction commits on return and rolls back on throw") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>("txs");
  topic.Register();
  auto producer = topic.RegisterProducer();
  db.client().InTransaction([&](Tx& tx) {
    producer.ProduceInTx(tx, Counter{1}, {"a", CompactionOptions{}});
  });
  CHECK_THROWS_WITH(db.client().InTransaction([&](Tx& tx) {
    producer.ProduceInTx(tx, Counter{2}, {"b", CompactionOptions{}});
    throw std::runtime_error("business rule failed");
  }),
                    "business rule failed");
  CHECK(topic.Key("a").CompactionHead().has_value());
  CHECK_FALSE(topic.Key("b").CompactionHead().has_value());
  CHECK(db.raw().Int("SELECT count(*) FROM " + db.MessageTable("txs")) == 1);
}

TEST_CASE(
    "a borrowed transaction is the caller's: its ROLLBACK discards lock row "
    "and produce") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>("borrowed");
  topic.Register();
  auto producer = topic.RegisterProducer();
  testing::RawConn mine;
  mine.Query("BEGIN");
  {
    Tx tx = Tx::Borrow(mine.get());
    CHECK(tx.borrowed());
    CHECK_FALSE(topic.Key("k").LockCompactionHead(tx).has_value());
    producer.ProduceInTx(tx, Counter{1}, {"k", CompactionOptions{}});
    CHECK_THROWS_AS(tx.Commit(), compaction::UsageError);
    CHECK(tx.status() == compaction::TxStatus::kActive);
  }  // destroying a borrowed Tx neither commits nor rolls back
  CHECK(PQtransactionStatus(mine.get()) == PQTRANS_INTRANS);
  mine.Query("ROLLBACK");
  CHECK(db.raw().Int("SELECT count(*) FROM " + db.HeadTable("borrowed")) == 0);
  CHECK(db.raw().Int("SELECT count(*) FROM " + db.MessageTable("borrowed")) ==
        0);

  mine.Query("BEGIN");
  {
    Tx tx = Tx::Borrow(mine.get());
    producer.ProduceInTx(tx, Counter{2}, {"k", CompactionOptions{}});
  }
  mine.Query("COMMIT");
  CHECK(topic.Key("k").CompactionHead()->message.value == 2);
}

TEST_CASE("only a connection idle inside a transaction can be borrowed") {
  CHECK_THROWS_AS(Tx::Borrow(nullptr), compaction::InvalidArgument);
  testing::RawConn conn;
  CHECK_THROWS_WITH(Tx::Borrow(conn.get()), Catch::Contains("BEGIN first"));
  conn.Query("BEGIN");
  conn.TryExec("SELECT 1/0");
  CHECK_THROWS_AS(Tx::Borrow(conn.get()), compaction::InvalidArgument);
}

// The lock sends its statements in a pipeline of its own; a caller's
// pipeline on the same connection is refused with a typed error, before
// anything is sent, and the transaction stays usable once it ends.
TEST_CASE("a borrowed connection in pipeline mode is refused, not corrupted") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>("piped");
  topic.Register();
  testing::RawConn mine;
  mine.Query("BEGIN");
  REQUIRE(PQenterPipelineMode(mine.get()) == 1);
  CHECK_THROWS_WITH(Tx::Borrow(mine.get()), Catch::Contains("pipeline mode"));
  REQUIRE(PQexitPipelineMode(mine.get()) == 1);
  Tx tx = Tx::Borrow(mine.get());
  REQUIRE(PQenterPipelineMode(mine.get()) == 1);  // after Borrow
  CHECK_THROWS_AS(topic.Key("k").LockCompactionHead(tx),
                  compaction::InvalidArgument);
  CHECK_THROWS_WITH(topic.RegisterProducer().ProduceInTx(
                        tx, Counter{1}, {"k", CompactionOptions{}}),
                    Catch::Contains("pipeline mode"));
  REQUIRE(PQexitPipelineMode(mine.get()) == 1);
  CHECK(PQtransactionStatus(mine.get()) == PQTRANS_INTRANS);  // nothing sent
  CHECK_FALSE(topic.Key("k").LockCompactionHead(tx).has_value());
  mine.Query("COMMIT");
  CHECK(db.raw().Int("SELECT count(*) FROM " + db.HeadTable("piped")) == 1);
}

TEST_CASE("committing a transaction that failed reports the rollback") {
  LiveDb db;
  Tx tx = db.client().Begin();
  PQclear(PQexec(tx.native_handle(), "SELECT 1/0"));
  CHECK_THROWS_AS(tx.Commit(), compaction::DatabaseError);
  // The connection went back to the pool clean.
  CHECK_NOTHROW(db.client().InTransaction([](Tx&) {}));
  // COMMIT is a prepared statement, prepared on a connection's first
  // commit: here inside the aborted transaction, which the server allows
  // for a transaction's end and answers with the tag ROLLBACK.
  compaction::Client fresh = db.NewClient(1);
  Tx first = fresh.Begin();
  PQclear(PQexec(first.native_handle(), "SELECT 1/0"));
  try {
    first.Commit();
    FAIL("an aborted transaction committed");
  } catch (const compaction::DatabaseError& e) {
    CHECK(e.sqlstate() == "25P02");
  }
  CHECK_NOTHROW(fresh.InTransaction([](Tx&) {}));
}

TEST_CASE("an owned transaction keeps its client's pool alive") {
  LiveDb db;
  db.client().Topic<Counter>("outlive").Register();
  auto tx =
      std::make_unique<Tx>(db.NewClient(1).Begin());  // the Client is gone
  auto topic = db.client().Topic<Counter>("outlive");
  CHECK_FALSE(topic.Key("k").LockCompactionHead(*tx).has_value());
  tx->Commit();
  tx.reset();
  CHECK(db.raw().Int("SELECT count(*) FROM " + db.HeadTable("outlive")) == 1);
}

TEST_CASE("a moved-from transaction is a typed error, not a crash") {
  LiveDb db;
  db.client().Topic<Counter>("moved").Register();
  Tx first = db.client().Begin();
  Tx second = std::move(first);
  CHECK_THROWS_WITH(
      first.Commit(),
      Catch::Contains("moved from"));  // NOLINT(bugprone-use-after-move)
  CHECK_THROWS_AS(first.Commit(), compaction::UsageError);
  CHECK_THROWS_AS(
      db.client().Topic<Counter>("moved").Key("k").LockCompactionHead(first),
      compaction::UsageError);
  CHECK_THROWS_AS(first.status(), compaction::UsageError);
  second.Commit();
}

TEST_CASE("a finished transaction says how it finished, as a UsageError") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>("finished");
  topic.Register();
  Tx committed = db.client().Begin();
  CHECK(committed.status() == compaction::TxStatus::kActive);
  committed.Commit();
  CHECK(committed.status() == compaction::TxStatus::kCommitted);
  CHECK_THROWS_AS(committed.Commit(), compaction::UsageError);
  CHECK_THROWS_WITH(committed.Commit(), Catch::Contains("already committed"));
  CHECK_THROWS_WITH(topic.Key("k").LockCompactionHead(committed),
                    Catch::Contains("already committed"));
  Tx rolled_back = db.client().Begin();
  rolled_back.Rollback();
  CHECK(rolled_back.status() == compaction::TxStatus::kAborted);
  CHECK_THROWS_WITH(rolled_back.Commit(), Catch::Contains("rolled back"));
  Tx failed = db.client().Begin();
  PQclear(PQexec(failed.native_handle(), "SELECT 1/0"));
  CHECK_THROWS_AS(failed.Commit(), compaction::DatabaseError);
  CHECK(failed.status() == compaction::TxStatus::kAborted);
}

// The connection breaks while COMMIT is in flight, which the library
// cannot tell apart from a COMMIT that went through: a second Commit says
// so instead of "already finished".
TEST_CASE(
    "a second Commit after CommitOutcomeUnknown says the transaction is in "
    "doubt") {
  LiveDb db;
  compaction::Client client = db.NewClient(1);
  // COMMIT is prepared by a transaction that ran something (an empty one
  // sends nothing at all), so below it is sent at once.
  client.InTransaction(
      [](Tx& tx) { PQclear(PQexec(tx.native_handle(), "SELECT 1")); });
  Tx tx = client.Begin();
  const std::string pid = std::to_string(PQbackendPID(tx.native_handle()));
  REQUIRE(db.raw().Value("SELECT pg_terminate_backend($1, 10000)", {pid}) ==
          "t");
  CHECK_THROWS_AS(tx.Commit(), compaction::CommitOutcomeUnknown);
  CHECK(tx.status() == compaction::TxStatus::kInDoubt);
  CHECK_THROWS_AS(tx.Commit(), compaction::UsageError);
  CHECK_THROWS_WITH(tx.Commit(), Catch::Contains("in doubt"));
  tx.Rollback();  // no-op: still in doubt
  CHECK(tx.status() == compaction::TxStatus::kInDoubt);
}

// native_handle() on a Tx that has sent nothing begins its transaction;
// on a finished one it must not: the connection is back in the pool, and
// a BEGIN left there would swallow the next autocommit produce.
TEST_CASE("native_handle of a finished Tx sends nothing") {
  LiveDb db;
  compaction::Client client = db.NewClient(1);
  auto topic = client.Topic<Counter>("after-finish");
  topic.Register();
  auto producer = topic.RegisterProducer();
  Tx tx = client.Begin();
  topic.Key("k").LockCompactionHead(tx);
  tx.Commit();
  PGconn* conn = tx.native_handle();
  CHECK(PQtransactionStatus(conn) == PQTRANS_IDLE);
  producer.Produce(Counter{1}, Compacted("k"));
  CHECK(db.raw().Int("SELECT count(*) FROM " +
                     db.MessageTable("after-finish")) == 1);
}

TEST_CASE("waiting for a pooled connection is bounded") {
  LiveDb db;
  compaction::ClientOptions options;
  options.schema = db.schema();
  options.pool_size = 1;
  options.acquire_timeout = std::chrono::milliseconds(200);
  auto client = compaction::Client::Connect("", options);
  auto topic = client.Topic<Counter>("pool");
  topic.Register();
  Tx holder = client.Begin();  // holds the only connection
  CHECK_THROWS_AS(topic.Key("k").CompactionHead(), compaction::PoolTimeout);
  holder.Rollback();
  CHECK_NOTHROW(topic.Key("k").CompactionHead());
}

TEST_CASE(
    "a malformed conninfo never echoes its text, which may hold a password") {
  for (const std::string& conninfo :
       {std::string("postgresql://u:sekr%zzet@localhost/db"),
        std::string("host=localhost password=sekr et")}) {
    try {
      compaction::Client::Connect(conninfo);
      FAIL("connected");
    } catch (const compaction::InvalidArgument& e) {
      CHECK_THAT(e.what(),
                 !Catch::Contains("sekr") && Catch::Contains("conninfo"));
    }
  }
}
