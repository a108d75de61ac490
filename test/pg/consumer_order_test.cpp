// Consumers, guarantees 3 (per-key order through `head`), 5 (partitions
// shared by instances) and 8 (typed errors), against a live database.
#include <catch2/catch.hpp>
#include <chrono>
#include <future>
#include <map>
#include <optional>

#include "citus_profile.hpp"
#include "consumer_support.hpp"
#include "db_helpers.hpp"
#include "live_db.hpp"

using compaction::ConsumerOptions;
using compaction::Delivery;
using compaction::InvalidArgument;
using compaction::MessageSchemaVersionMismatch;
using compaction::ProduceOptions;
using compaction::RawMessage;
using compaction::TopicConfig;
using compaction::Tx;
using testing::Compacted;
using testing::ConsumeAll;
using testing::Counter;
using testing::Ids;
using testing::LiveDb;
using testing::LogIds;
using testing::NaiveRead;
using namespace std::chrono_literals;

namespace {

using State = std::map<std::string, std::optional<nlohmann::json>>;

// Applies the head deliveries in order: a key's value, or none after a
// tombstone.
void Apply(State& state, const std::vector<Delivery<RawMessage>>& ds) {
  for (const auto& d : ds) {
    if (!d.head) continue;
    if (d.message) {
      state[d.message_key] = d.message->payload;
    } else {
      state[d.message_key] = std::nullopt;
    }
  }
}

// The topic's current heads, as CompactionHead sees them.
State Heads(compaction::TopicHandle<RawMessage>& topic,
            const std::vector<std::string>& keys) {
  State out;
  for (const auto& k : keys) {
    auto head = topic.Key(k).CompactionHead();
    out[k] = head ? std::optional(head->message.payload) : std::nullopt;
  }
  return out;
}

RawMessage V(int version, int n) { return RawMessage{version, {{"n", n}}}; }

}  // namespace

TEST_CASE("head deliveries leave each key at its head, whatever the order") {
  LiveDb db;
  // The writers' race is forced by a lock wait in the coordinator's
  // pg_stat_activity; on Citus the wait is on a worker (the same race of
  // one key's writers is forced through citus_lock_waits in
  // citus.library_api).
  if (testing::SkipOnCitus("the lock wait it forces is on a worker")) return;
  auto topic = db.client().Topic<RawMessage>("order");
  topic.Register();
  auto producer = topic.RegisterProducer();
  auto consumer = topic.Consumer("c", ConsumerOptions{2, false});
  auto compacts = topic.Consumer("heads", ConsumerOptions{2, true});
  State state;
  State heads_state;
  auto poll = [&] {
    Apply(state, ConsumeAll(db.client(), consumer));
    auto hs = ConsumeAll(db.client(), compacts);
    for (const auto& d : hs) CHECK(d.head);
    Apply(heads_state, hs);
  };

  // Writers of one key meet on its head row: the second waits (seen in
  // pg_stat_activity) until the first commits. "a": the waiting writer
  // ranks lower and loses; "b": it ranks higher and wins. Other keys'
  // messages commit past both meanwhile and are delivered first.
  auto contend = [&](const std::string& key, std::int64_t first_rank,
                     std::int64_t second_rank, int n) {
    Tx first = db.client().Begin();
    producer.ProduceInTx(first, V(1, n), Compacted(key, first_rank));
    auto second = std::async(std::launch::async, [&, key] {
      return producer.Produce(V(1, n + 1), Compacted(key, second_rank));
    });
    REQUIRE(
        testing::WaitForLockWait(db.raw(), "compaction:Produce", db.schema()));
    producer.Produce(V(1, n + 2), Compacted("x" + key, 0));
    poll();
    first.Commit();
    second.get();
  };
  contend("a", 5, 3, 1);
  poll();
  contend("b", 1, 9, 10);
  // "c": a newer schema version beats any rank; "d": then a tombstone wins.
  producer.Produce(V(2, 5), Compacted("c", 0));
  producer.Produce(V(1, 6), Compacted("c", 100));
  producer.Produce(V(1, 7), Compacted("d", 0));
  poll();
  // Tombstones come from a typed producer (at its schema version, 1).
  auto typed = db.client().Topic<Counter>("order").RegisterProducer();
  CHECK(typed.ProduceTombstone("d", compaction::CompactionOptions{1})
            .head_advanced);
  CHECK_FALSE(typed.ProduceTombstone("c", compaction::CompactionOptions{500})
                  .head_advanced);
  poll();
  const std::vector<std::string> keys{"a", "b", "c", "d", "xa", "xb"};
  const State expected = Heads(topic, keys);
  CHECK(expected.at("a") == nlohmann::json{{"n", 1}});
  CHECK(expected.at("b") == nlohmann::json{{"n", 11}});
  CHECK(expected.at("c") == nlohmann::json{{"n", 5}});
  CHECK(expected.at("d") == std::nullopt);
  for (const auto& k : keys) {
    INFO(k);
    CHECK(state.count(k) == 1);
    CHECK(state[k] == expected.at(k));
    CHECK(heads_state[k] == expected.at(k));
  }
}
