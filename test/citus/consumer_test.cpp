// Consumers on a coordinator and two workers (test/citus/with_cluster.sh):
// a Poll reads one partition with one statement routed to its shard under
// the coordinator's window, commits without two-phase commit, and does not
// pass a two-phase writer whose prepared part on the shard is not committed
// yet (doc/citus.md, "Consumers on Citus").
#include <catch2/catch.hpp>
#include <cctype>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <future>
#include <memory>
#include <set>
#include <string>
#include <thread>
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

compaction::TopicConfig Partitions(int n) {
  compaction::TopicConfig config;
  config.partitions = n;
  return config;
}

// Every delivery of `rounds` Polls, each in its own committed transaction.
std::vector<std::int64_t> PollIds(compaction::Client& client,
                                  compaction::Consumer<Counter>& consumer,
                                  int rounds) {
  std::vector<std::int64_t> out;
  for (int i = 0; i < rounds; ++i) {
    for (const auto& d : client.InTransaction(
             [&](compaction::Tx& tx) { return consumer.Poll(tx); })) {
      out.push_back(d.id);
    }
  }
  return out;
}

// The shard tables a list of remote commands names: the table's name, an
// underscore and the shard id. (Searched by hand: g++ 12 reports a false
// maybe-uninitialized inside <regex> under the sanitizers, and -Werror.)
std::set<std::string> Shards(const std::vector<std::string>& lines,
                             const std::string& message) {
  const std::string table = message.substr(message.find('.') + 1) + "_";
  std::set<std::string> out;
  for (const std::string& line : lines) {
    for (std::size_t at = line.find(table); at != std::string::npos;
         at = line.find(table, at + 1)) {
      std::size_t end = at + table.size();
      while (end < line.size() &&
             std::isdigit(static_cast<unsigned char>(line[end]))) {
        ++end;
      }
      if (end > at + table.size()) out.insert(line.substr(at, end - at));
    }
  }
  return out;
}

}  // namespace

TEST_CASE(
    "a Poll reads its partition on one worker, under the coordinator's "
    "window, and commits without two-phase commit") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>("routed");
  topic.Register(Partitions(4));
  auto producer = topic.RegisterProducer();
  for (int i = 0; i < 40; ++i) {
    producer.Produce(Counter{i},
                     testing::Compacted("k-" + std::to_string(i % 13)));
  }
  RemoteCommands remote;
  compaction::ClientOptions options = testing::ClientOptionsForTests();
  options.schema = db.schema();
  options.notice_handler = remote.Handler();
  compaction::Client client = compaction::Client::Connect(
      testing::ClientConninfo("options='-c citus.log_remote_commands=on "
                              "-c client_min_messages=notice'"),
      options);
  auto consumer = client.Topic<Counter>("routed").Consumer("c", {100, false});
  const std::string message = db.MessageTable("routed");
  std::vector<std::int64_t> seen;
  // The first Poll creates the positions; then each Poll works one
  // partition: its statements go to that partition's shard alone.
  for (int i = 0; i < 6; ++i) {
    remote.Take();
    const auto batch = client.InTransaction(
        [&](compaction::Tx& tx) { return consumer.Poll(tx); });
    const std::vector<std::string> issued = remote.Take();
    INFO(Join(issued));
    // The window's read and the look for prepared parts name one shard;
    // the look at which partitions have something new (before the lock)
    // reads every shard, read-only.
    std::vector<std::string> read;
    for (const std::string& line : issued) {
      if (line.find("WITH w AS MATERIALIZED") != std::string::npos ||
          line.find("pg_lock_status") != std::string::npos) {
        read.push_back(line);
      }
    }
    CHECK(Shards(read, message).size() <= 1);
    CHECK(Count(issued, "PREPARE TRANSACTION") == 0);
    CHECK(Count(issued, "COMMIT PREPARED") == 0);
    if (!batch.empty()) CHECK(read.size() == 2);
    for (const auto& d : batch) seen.push_back(d.id);
  }
  // Every message once, each partition in its writers' commit order.
  const std::set<std::int64_t> unique(seen.begin(), seen.end());
  CHECK(seen.size() == 40);
  CHECK(unique.size() == 40);
  CHECK(PollIds(client, consumer, 4).empty());
  // Later messages come with later windows.
  producer.Produce(Counter{99}, testing::Compacted("k-1"));
  CHECK(PollIds(client, consumer, 4).size() == 1);

  // A one-partition topic: the whole Poll runs on its worker, one worker
  // transaction, committed with COMMIT.
  client.Topic<Counter>("one").Register();
  auto one = client.Topic<Counter>("one");
  one.RegisterProducer().Produce(Counter{1}, testing::Compacted("a"));
  auto single = one.Consumer("c");
  CHECK(PollIds(client, single, 1).size() == 1);  // creates the positions
  one.RegisterProducer().Produce(Counter{2}, testing::Compacted("a"));
  remote.Take();
  CHECK(PollIds(client, single, 1).size() == 1);
  const std::vector<std::string> issued = remote.Take();
  INFO(Join(issued));
  CHECK(Shards(issued, db.MessageTable("one")).size() == 1);
  CHECK(Count(issued, "assign_distributed_transaction_id") == 1);
  CHECK(Count(issued, "issuing COMMIT") == 1);
  CHECK(Count(issued, "PREPARE TRANSACTION") == 0);
}

TEST_CASE(
    "a Poll does not pass a two-phase writer still prepared on its shard, "
    "and delivers its messages once after recovery") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>("held");
  // Four partitions: Citus hashes the partition number to pick its shard,
  // so two partitions may share one shard; four spread over both workers.
  topic.Register(Partitions(4));
  auto consumer = topic.Consumer("c", {100, false});
  auto plain = topic.RegisterProducer();
  plain.Produce(Counter{-1}, testing::Compacted("before"));
  CHECK(PollIds(db.client(), consumer, 5).size() == 1);

  // The ordering to force: the writer's coordinator transaction has
  // committed (its xid is visible in every new coordinator snapshot) and
  // its parts on the workers are still prepared (held_two_phase.hpp, as in
  // test citus.library_api).
  testing::HeldTwoPhase held(db);
  RemoteCommands remote;
  compaction::Client writer = held.Connect("prepared_writer", remote);
  auto producer = writer.Topic<Counter>("held").RegisterProducer();
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
    } catch (const std::exception& e) {
      return std::string("other: ") + e.what();
    }
  });
  if (!held.WaitForStandbyWait()) {
    FAIL("no SyncRep wait; the batch: " << produced.get() << "\n"
                                        << Join(remote.Take()));
  }
  CHECK(held.PreparedPerWorker() == std::vector<std::int64_t>{1, 1});
  held.CutWorkerConnections();
  CHECK(held.TerminateBackend());
  CHECK(produced.get() == "unknown");
  held.ReleaseStandby();
  // The writer's xid is visible on the coordinator; its rows are not on
  // the shards. A one-shard writer after it commits normally.
  CHECK(db.raw().Int("SELECT count(*) FROM " + db.MessageTable("held")) == 1);
  plain.Produce(Counter{100}, testing::Compacted("after"));

  // Polls during the hazard: a partition whose shard holds a prepared part
  // is held (its window not opened past the writer), so none of the
  // writer's messages is skipped; the one-shard writer's message may come
  // now or after.
  const std::vector<std::int64_t> during = PollIds(db.client(), consumer, 8);
  CHECK(during.size() <= 1);
  CHECK(held.PreparedPerWorker() == std::vector<std::int64_t>{1, 1});

  // Citus's recovery commits the prepared parts: the 16 messages and the
  // later one are delivered, each once.
  held.Recover();
  std::vector<std::int64_t> all = PollIds(db.client(), consumer, 8);
  CHECK(all.size() + during.size() == 17);
  all.insert(all.end(), during.begin(), during.end());
  const std::set<std::int64_t> unique(all.begin(), all.end());
  CHECK(unique.size() == 17);
  CHECK(PollIds(db.client(), consumer, 4).empty());
}

TEST_CASE(
    "ListTopicStats reads each consumer's lag from the shards, one routed "
    "count per position") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>("lagging");
  topic.Register(Partitions(4));
  auto producer = topic.RegisterProducer();
  for (int i = 0; i < 30; ++i) {
    producer.Produce(Counter{i},
                     testing::Compacted("k-" + std::to_string(i % 11)));
  }
  auto consumer = topic.Consumer("c", {5, false});
  const std::vector<std::int64_t> got = PollIds(db.client(), consumer, 3);
  REQUIRE(got.size() > 0);
  const auto topics = db.client().ListTopicStats();
  REQUIRE(topics.size() == 1);
  INFO(topics[0].stats.consumers_error);
  CHECK(topics[0].stats.consumers_error.empty());
  REQUIRE(topics[0].stats.consumers.size() == 1);
  const compaction::ConsumerLag& lag = topics[0].stats.consumers[0];
  CHECK(lag.consumer == "c");
  CHECK(lag.partitions == 4);
  CHECK(lag.lag_messages == 30 - static_cast<std::int64_t>(got.size()));
  CHECK_FALSE(lag.lag_messages_capped);
  // Everything consumed: no lag.
  PollIds(db.client(), consumer, 20);
  CHECK(db.client().ListTopicStats()[0].stats.consumers[0].lag_messages == 0);
}
