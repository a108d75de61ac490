// The library's own operations on a coordinator and two workers
// (test/citus/with_cluster.sh), through the public API: what touches one
// key runs on its worker with a plain commit (no PREPARE TRANSACTION in
// citus.log_remote_commands), and the plain and batch produce name the
// partition so Citus can route them.
#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "held_two_phase.hpp"
#include "live_db.hpp"
#include "remote_commands.hpp"

using testing::Count;
using testing::Counter;
using testing::Join;
using testing::LiveDb;
using testing::RemoteCommands;

namespace {

// A client whose connections log what the coordinator sends the workers.
compaction::Client LoggingClient(LiveDb& db, RemoteCommands& remote) {
  compaction::ClientOptions options = testing::ClientOptionsForTests();
  options.schema = db.schema();
  options.notice_handler = remote.Handler();
  return compaction::Client::Connect(
      testing::ClientConninfo("options='-c citus.log_remote_commands=on "
                              "-c client_min_messages=notice'"),
      options);
}

compaction::TopicConfig FourShards() {
  compaction::TopicConfig config;
  config.partitions = 4;
  return config;
}

}  // namespace

TEST_CASE(
    "LockCompactionHead, ProduceInTx, Update and the head read of one key "
    "run on its worker with a plain commit") {
  LiveDb db;
  db.client().Topic<Counter>("one-key").Register(FourShards());
  RemoteCommands remote;
  compaction::Client client = LoggingClient(db, remote);
  auto topic = client.Topic<Counter>("one-key");
  auto producer = topic.RegisterProducer();
  const auto key = topic.Key("k");
  remote.Take();

  // Lock (new key: the headless row), produce through the producer and
  // through the key handle, each in one transaction.
  CHECK(testing::Increment(client, key, producer) == 1);
  CHECK(testing::Increment(client, key, producer) == 2);
  client.InTransaction([&](compaction::Tx& tx) {
    const auto head = key.LockCompactionHead(tx);
    REQUIRE(head);
    key.ProduceInTx(tx, Counter{head->message.value + 1});
  });
  for (int i = 0; i < 2; ++i) {
    key.Update([](const std::optional<Counter>& c) {
      return std::optional<Counter>(Counter{c ? c->value + 1 : 1});
    });
  }
  std::vector<std::string> issued = remote.Take();
  INFO(Join(issued));
  CHECK(Count(issued, "PREPARE TRANSACTION") == 0);
  CHECK(Count(issued, "issuing COMMIT") == 5);
  CHECK(Count(issued, "FOR UPDATE") == 5);

  const auto head = key.CompactionHead();
  REQUIRE(head);
  CHECK(head->message.value == 5);
  issued = remote.Take();
  CHECK(Count(issued, "PREPARE TRANSACTION") == 0);
  CHECK(Count(issued, "SELECT") == 1);  // routed to the key's shard alone

  // The key's messages, tombstones skipped or shown: its shard alone too.
  CHECK(key.Messages(10).size() == 5);
  CHECK(client.Topic<compaction::RawMessage>("one-key")
            .Key("k")
            .Messages(10)
            .size() == 5);
  issued = remote.Take();
  INFO(Join(issued));
  CHECK(Count(issued, "SELECT") == 2);

  // The listing joins heads and messages on every shard.
  for (int i = 0; i < 12; ++i) {
    topic.Key("other-" + std::to_string(i)).Update([](const auto&) {
      return std::optional<Counter>(Counter{7});
    });
  }
  const auto heads = topic.ListCompactionHeads();
  REQUIRE(heads.size() == 13);
  CHECK(heads.front().message_key == "k");
  CHECK(heads.back().message.value == 7);
}

TEST_CASE(
    "two first updates of a new key compose: the second waits on the "
    "worker (citus_lock_waits) and reads the first's value") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>("race");
  topic.Register(FourShards());
  auto producer = topic.RegisterProducer();
  const auto key = topic.Key("fresh");

  std::promise<void> locked;
  std::promise<void> go_on;
  auto first = std::async(std::launch::async, [&] {
    return db.client().InTransaction([&](compaction::Tx& tx) {
      const auto head = key.LockCompactionHead(tx);
      locked.set_value();
      go_on.get_future().wait();
      const std::int64_t next = (head ? head->message.value : 0) + 1;
      producer.ProduceInTx(tx, Counter{next}, testing::Compacted("fresh"));
      return next;
    });
  });
  locked.get_future().wait();
  auto second = std::async(std::launch::async, [&] {
    return testing::Increment(db.client(), key, producer);
  });
  // The second waits on the worker for the first's row lock: Citus's view
  // of the lock graph across nodes shows it.
  bool waiting = false;
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!waiting && std::chrono::steady_clock::now() < deadline) {
    waiting = db.raw().Int(
                  "SELECT count(*) FROM pg_catalog.citus_lock_waits WHERE "
                  "strpos(blocked_statement, 'lock_') > 0 OR "
                  "strpos(blocked_statement, 'compaction_head_') > 0") > 0;
    if (!waiting) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  CHECK(waiting);
  go_on.set_value();
  CHECK(first.get() == 1);
  CHECK(second.get() == 2);
  const auto head = key.CompactionHead();
  REQUIRE(head);
  CHECK(head->message.value == 2);
}
TEST_CASE(
    "the plain produce and a batch name the partition: keyless, keyed and "
    "one key's batch") {
  LiveDb db;
  db.client().Topic<Counter>("plain").Register(FourShards());
  RemoteCommands remote;
  compaction::Client client = LoggingClient(db, remote);
  auto producer = client.Topic<Counter>("plain").RegisterProducer();
  remote.Take();

  producer.Produce(Counter{1});  // keyless
  compaction::ProduceOptions keyed;
  keyed.message_key = "uncompacted";
  producer.Produce(Counter{2}, keyed);
  std::vector<std::string> issued = remote.Take();
  INFO(Join(issued));
  CHECK(Count(issued, "PREPARE TRANSACTION") == 0);

  // A batch over one key: one shard, a plain commit.
  std::vector<compaction::Outgoing<Counter>> batch;
  for (int i = 1; i <= 3; ++i) {
    batch.push_back({Counter{i}, testing::Compacted("b", i)});
  }
  const auto results = producer.ProduceBatch(batch);
  REQUIRE(results.size() == 3);
  issued = remote.Take();
  INFO(Join(issued));
  CHECK(Count(issued, "PREPARE TRANSACTION") == 0);
  const auto head = client.Topic<Counter>("plain").Key("b").CompactionHead();
  REQUIRE(head);
  CHECK(head->message.value == 3);
  CHECK(db.raw().Int("SELECT count(*) FROM " + db.MessageTable("plain")) == 5);
  // The keyless message took the column default, its id modulo the
  // partitions: where the commit check looks for an unkeyed message.
  CHECK(db.raw().Int("SELECT count(*) FROM " + db.MessageTable("plain") +
                     " WHERE message_key IS NULL AND partition = id % 4") == 1);

  // The control: a batch over keys on both workers is a two-phase commit.
  batch.clear();
  for (int i = 0; i < 16; ++i) {
    batch.push_back({Counter{i}, testing::Compacted("m-" + std::to_string(i))});
  }
  CHECK(producer.ProduceBatch(batch).size() == 16);
  issued = remote.Take();
  CHECK(Count(issued, "PREPARE TRANSACTION") == 2);
}

TEST_CASE(
    "a distributed deadlock over keys on both workers is a RetryableError "
    "(40P01) and the other transaction goes on") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>("deadlock");
  topic.Register(FourShards());
  const std::string head = db.HeadTable("deadlock");
  // Two keys whose shards live on different workers.
  auto node_of = [&](const std::string& key) {
    return db.raw().Int(
        "SELECT s.nodeport FROM pg_catalog.citus_shards s WHERE s.shardid = "
        "pg_catalog.get_shard_id_for_distribution_column($1::regclass, "
        "((pg_catalog.hashtextextended($2::text, 0) % 4 + 4) % 4)::integer)",
        {head, key});
  };
  const std::string k1 = "key-0";
  std::string k2;
  for (int i = 1; i < 64 && k2.empty(); ++i) {
    const std::string candidate = "key-" + std::to_string(i);
    if (node_of(candidate) != node_of(k1)) k2 = candidate;
  }
  REQUIRE_FALSE(k2.empty());
  for (const std::string& k : {k1, k2}) {
    topic.Key(k).Update(
        [](const auto&) { return std::optional<Counter>(Counter{1}); });
  }

  std::promise<void> a_locked;
  std::promise<void> b_locked;
  auto run = [&](const std::string& first, const std::string& second,
                 std::promise<void>& mine,
                 std::shared_future<void> other) -> std::string {
    try {
      db.client().InTransaction([&](compaction::Tx& tx) {
        topic.Key(first).LockCompactionHead(tx);
        mine.set_value();
        other.wait();
        topic.Key(second).LockCompactionHead(tx);
      });
      return "committed";
    } catch (const compaction::RetryableError& e) {
      return "retryable " + e.sqlstate();
    } catch (const std::exception& e) {
      return std::string("other: ") + e.what();
    }
  };
  std::shared_future<void> a_ready = a_locked.get_future().share();
  std::shared_future<void> b_ready = b_locked.get_future().share();
  auto a = std::async(std::launch::async,
                      [&] { return run(k1, k2, a_locked, b_ready); });
  auto b = std::async(std::launch::async,
                      [&] { return run(k2, k1, b_locked, a_ready); });
  const std::string ra = a.get();
  const std::string rb = b.get();
  INFO(ra << " / " << rb);
  // Citus's distributed deadlock detector cancels one of the two.
  CHECK(((ra == "committed" && rb == "retryable 40P01") ||
         (rb == "committed" && ra == "retryable 40P01")));
}

TEST_CASE(
    "a one-shard COMMIT whose backend is terminated while its worker "
    "commits still reports committed") {
  LiveDb db;
  auto setup = db.client().Topic<Counter>("broken");
  setup.Register(FourShards());
  const std::string message = db.MessageTable("broken");
  const auto shard = db.raw().Query(
      "SELECT s.shard_name, s.nodeport FROM pg_catalog.citus_shards s WHERE "
      "s.shardid = pg_catalog.get_shard_id_for_distribution_column("
      "$1::regclass, ((pg_catalog.hashtextextended('k', 0) % 4 + 4) % 4)"
      "::integer)",
      {message});
  REQUIRE(shard.size() == 1);
  // On the key's worker, a deferred trigger on its shard makes the
  // worker's COMMIT wait for an advisory lock this test holds.
  testing::RawConn worker("port=" + *shard[0][1]);
  const std::string s = db.QuotedSchema();
  // Citus refuses DDL for its objects on a worker: the function is created
  // through the coordinator (which propagates it), the trigger on the shard
  // by hand, on purpose.
  db.raw().Query("CREATE FUNCTION " + s +
                 ".hold() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
                 "PERFORM pg_catalog.pg_advisory_xact_lock(4242); "
                 "RETURN NULL; END $$");
  worker.Query("SET citus.enable_manual_changes_to_shards = on");
  // shard_name comes schema-qualified.
  worker.Query("CREATE CONSTRAINT TRIGGER hold AFTER INSERT ON " +
               *shard[0][0] +
               " DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION " +
               s + ".hold()");
  worker.Query("SELECT pg_catalog.pg_advisory_lock(4242)");

  compaction::ClientOptions options = testing::ClientOptionsForTests();
  options.schema = db.schema();
  options.application_name = "broken_commit";
  options.commit_check_timeout = std::chrono::seconds(3);
  options.pool_size = 1;
  compaction::Client client = compaction::Client::Connect("", options);
  auto producer = client.Topic<Counter>("broken").RegisterProducer();
  auto produced = std::async(std::launch::async, [&]() -> std::string {
    try {
      producer.Produce(Counter{1}, testing::Compacted("k"));
      return "committed";
    } catch (const compaction::CommitOutcomeUnknown&) {
      return "unknown";
    } catch (const compaction::ConnectionLost&) {
      return "lost";
    } catch (const std::exception& e) {
      return std::string("other: ") + e.what();
    }
  });
  // The worker's COMMIT waits on the lock; then the coordinator's backend
  // is terminated in the middle of its COMMIT.
  bool waiting = false;
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!waiting && std::chrono::steady_clock::now() < deadline) {
    waiting = worker.Int(
                  "SELECT count(*) FROM pg_catalog.pg_stat_activity "
                  "WHERE wait_event_type = 'Lock' AND wait_event = "
                  "'advisory'") > 0;
    if (!waiting) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  REQUIRE(waiting);
  CHECK(db.raw().Int("SELECT count(pg_catalog.pg_terminate_backend(pid)) "
                     "FROM pg_catalog.pg_stat_activity WHERE "
                     "application_name = 'broken_commit' AND state = "
                     "'active'") == 1);
  // Citus keeps the terminated backend until the worker answers its
  // COMMIT: released, the worker commits, then the coordinator, and only
  // then does the backend go, after the client has its COMMIT reply. So
  // this never reaches the library's commit check (it passes with
  // commit_check_timeout = 0 too); the two-phase case below does.
  worker.Query("SELECT pg_catalog.pg_advisory_unlock(4242)");
  const std::string outcome = produced.get();
  CHECK(outcome == "committed");
  CHECK(db.raw().Int("SELECT count(*) FROM " + message) == 1);
  worker.Query("DROP TRIGGER hold ON " + *shard[0][0]);
}

TEST_CASE(
    "a two-phase COMMIT broken before its workers commit is "
    "CommitOutcomeUnknown, not ConnectionLost") {
  LiveDb db;
  db.client().Topic<Counter>("prepared").Register(FourShards());
  const std::string message = db.MessageTable("prepared");
  // The ordering to force: the coordinator has committed (its
  // pg_dist_transaction rows are written) but no worker has had its COMMIT
  // PREPARED (held_two_phase.hpp).
  testing::HeldTwoPhase held(db);
  RemoteCommands remote;
  compaction::Client client = held.Connect("prepared_commit", remote);
  auto producer = client.Topic<Counter>("prepared").RegisterProducer();
  std::vector<compaction::Outgoing<Counter>> batch;
  for (int i = 0; i < 16; ++i) {
    batch.push_back({Counter{i}, testing::Compacted("p-" + std::to_string(i))});
  }
  auto produced = std::async(std::launch::async, [&]() -> std::string {
    try {
      producer.ProduceBatch(batch);
      return "committed";
    } catch (const compaction::CommitOutcomeUnknown&) {
      return "unknown";
    } catch (const compaction::ConnectionLost&) {
      return "lost";
    } catch (const std::exception& e) {
      return std::string("other: ") + e.what();
    }
  });
  REQUIRE(held.WaitForStandbyWait());
  remote.Take();  // the batch's own commands, all sent by now
  CHECK(held.CutWorkerConnections() == 2);
  // The client's COMMIT breaks: the backend commits locally, fails to send
  // COMMIT PREPARED and exits.
  CHECK(held.TerminateBackend());
  const std::string outcome = produced.get();
  // The commit check looks for the batch's message twice (before and after
  // the old backend is gone), each time on its key's shard alone.
  const std::vector<std::string> looks = remote.Take();
  held.ReleaseStandby();
  // Absent, yet committed: Citus's recovery commits the prepared parts.
  CHECK(outcome == "unknown");
  INFO(Join(looks));
  CHECK(Count(looks, ".message_") == 2);
  CHECK(db.raw().Int("SELECT count(*) FROM " + message) == 0);
  held.Recover();
  CHECK(db.raw().Int("SELECT count(*) FROM " + message) == 16);
}

TEST_CASE(
    "a batch on Citus equals producing its messages one by one, over four "
    "shards") {
  LiveDb db;
  auto batched = db.client().Topic<compaction::RawMessage>("batched");
  auto single = db.client().Topic<compaction::RawMessage>("single");
  batched.Register(FourShards());
  single.Register(FourShards());
  auto batch_producer = batched.RegisterProducer();
  auto single_producer = single.RegisterProducer();
  // A key's head (version/rank/payload, "tombstone", "headless") and its
  // messages in id order, and each message's partition.
  auto states = [&](const std::string& topic) {
    std::map<std::string, std::vector<std::string>> out;
    for (const auto& row : db.raw().Query(
             "SELECT h.message_key, coalesce(h.schema_version::text, '-') || "
             "'/' || coalesce(h.compaction_rank::text, '-') || '/' || CASE "
             "WHEN h.head_id IS NULL THEN 'headless' WHEN m.payload IS NULL "
             "THEN 'tombstone' ELSE m.payload::text END FROM " +
             db.HeadTable(topic) + " h LEFT JOIN " + db.MessageTable(topic) +
             " m ON m.id = h.head_id AND m.partition = h.partition ORDER BY "
             "1")) {
      out[*row[0]].push_back("head " + *row[1]);
    }
    for (const auto& row : db.raw().Query(
             "SELECT coalesce(message_key, '<none>'), schema_version::text || "
             "'/' || coalesce(compaction_rank::text, '-') || '/' || "
             "coalesce(payload::text, 'tombstone') || '/' || CASE WHEN "
             "message_key IS NULL THEN (partition = id % 4)::text ELSE "
             "partition::text END FROM " +
             db.MessageTable(topic) + " ORDER BY id")) {
      out[*row[0]].push_back(*row[1]);
    }
    return out;
  };
  std::mt19937_64 rng(Catch::rngSeed());
  auto pick = [&](int n) {
    return static_cast<int>(std::uniform_int_distribution<int>(0, n - 1)(rng));
  };
  int value = 0;
  for (int round = 0; round < 8; ++round) {
    // Odd rounds name each compacted key at most once.
    const bool once = round % 2 == 1;
    std::string letters = "abcdefghijklmnopqrstuvwxyz";
    std::shuffle(letters.begin(), letters.end(), rng);
    std::size_t next = 0;
    std::vector<compaction::Outgoing<compaction::RawMessage>> batch(
        1 + pick(once ? 20 : 30));
    for (auto& e : batch) {
      const int shape = pick(10);
      e.message = compaction::RawMessage{1 + pick(2), {{"n", ++value}}};
      if (shape == 0) continue;  // keyless
      e.options.message_key = std::string(1, letters[pick(once ? 26 : 6)]);
      if (shape == 1) continue;  // keyed, not compacted
      if (once) e.options.message_key = std::string(1, letters[next++]);
      e.options.compaction = compaction::CompactionOptions{pick(3) - 1};
      if (shape == 2) {
        e.message = compaction::RawMessage{1 + pick(2), nullptr, true};
      }
    }
    const auto got = batch_producer.ProduceBatch(batch);
    REQUIRE(got.size() == batch.size());
    for (std::size_t i = 0; i < batch.size(); ++i) {
      const auto& e = batch[i];
      const compaction::ProduceResult want =
          e.message->tombstone
              ? single_producer.ProduceTombstone(*e.options.message_key,
                                                 *e.options.compaction,
                                                 e.message->schema_version)
              : single_producer.Produce(*e.message, e.options);
      INFO("round " << round << ", element " << i);
      CHECK(got[i].head_advanced == want.head_advanced);
      if (i > 0) CHECK(got[i].id > got[i - 1].id);
    }
    CHECK(states("batched") == states("single"));
  }
}

TEST_CASE("concurrent batches over overlapping keys on Citus never deadlock") {
  LiveDb db;
  db.client().Topic<Counter>("overlap").Register(FourShards());
  constexpr int kThreads = 4;
  auto client = db.NewClient(kThreads);
  std::atomic<bool> stop{false};
  std::atomic<std::int64_t> batches{0}, errors{0};
  std::vector<std::string> failures(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      auto producer = client.Topic<Counter>("overlap").RegisterProducer();
      std::mt19937_64 rng(Catch::rngSeed() + t);
      std::vector<std::string> keys;
      for (int k = 0; k < 40; ++k) keys.push_back("k" + std::to_string(k));
      for (int n = 0; !stop; ++n) {
        std::shuffle(keys.begin(), keys.end(), rng);
        // Every other batch names some of its keys twice.
        const int distinct = n % 2 == 0 ? 24 : 16;
        std::vector<compaction::Outgoing<Counter>> batch;
        for (int i = 0; i < 24; ++i) {
          batch.push_back(
              {Counter{i}, testing::Compacted(keys[i % distinct], i % 3)});
        }
        try {
          producer.ProduceBatch(batch);
          ++batches;
        } catch (const std::exception& e) {
          ++errors;
          failures[t] = e.what();
        }
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::seconds(6));
  stop = true;
  for (auto& th : threads) th.join();
  for (const auto& f : failures) CHECK(f == "");
  CHECK(errors == 0);
  CHECK(batches > 8);
  CHECK(db.raw().Int("SELECT count(*) FROM " + db.HeadTable("overlap") +
                     " h LEFT JOIN " + db.MessageTable("overlap") +
                     " m ON m.id = h.head_id AND m.partition = h.partition "
                     "AND m.message_key = h.message_key WHERE m.id IS NULL") ==
        0);
}
