// Consumers, guarantee 7: Wait wakes when a commit makes messages
// available to the consumer, and only then. Not timing-strict: the wake-up
// latency is printed for the record, not asserted.
#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <future>
#include <iostream>

#include "consumer_support.hpp"
#include "live_db.hpp"

using compaction::ConsumerOptions;
using compaction::Tx;
using testing::ConsumeAll;
using testing::Counter;
using testing::LiveDb;
using namespace std::chrono_literals;

TEST_CASE("Wait answers whether a Poll may find something new") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>("wait");
  topic.Register();
  auto producer = topic.RegisterProducer();
  auto consumer = topic.Consumer("c");
  CHECK_FALSE(consumer.Wait(50ms));  // an empty topic, no positions yet
  producer.Produce(Counter{1});
  CHECK(consumer.Wait(0ms));  // no positions: everything is new
  ConsumeAll(db.client(), consumer);
  CHECK_FALSE(consumer.Wait(50ms));
  // A late commit wakes it too: its id is below what was consumed.
  Tx late = db.client().Begin();
  producer.ProduceInTx(late, Counter{2});
  producer.Produce(Counter{3});
  CHECK(consumer.Wait(1s));
  ConsumeAll(db.client(), consumer);
  CHECK_FALSE(consumer.Wait(50ms));  // the open transaction is not news
  late.Commit();
  CHECK(consumer.Wait(1s));
  CHECK(ConsumeAll(db.client(), consumer).size() == 1);
  CHECK_FALSE(consumer.Wait(0ms));
}

TEST_CASE("Wait wakes soon after a commit, latency recorded") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>("wake");
  topic.Register();
  auto producer = topic.RegisterProducer();
  auto consumer = topic.Consumer("c");
  producer.Produce(Counter{0});
  ConsumeAll(db.client(), consumer);
  std::vector<double> latencies_ms;
  for (int i = 0; i < 20; ++i) {
    auto waiter = std::async(std::launch::async, [&] {
      const bool woke = consumer.Wait(10s);
      return std::make_pair(woke, std::chrono::steady_clock::now());
    });
    // Let the waiter reach its sleep between probes at a varying phase.
    std::this_thread::sleep_for(std::chrono::milliseconds(5 + (i * 7) % 40));
    producer.Produce(Counter{i + 1});
    const auto committed = std::chrono::steady_clock::now();
    auto [woke, at] = waiter.get();
    REQUIRE(woke);
    latencies_ms.push_back(std::max(
        0.0,
        std::chrono::duration<double, std::milli>(at - committed).count()));
    ConsumeAll(db.client(), consumer);
  }
  std::sort(latencies_ms.begin(), latencies_ms.end());
  std::cout << "Wait wake-up after commit, ms: p50 "
            << latencies_ms[latencies_ms.size() / 2] << ", max "
            << latencies_ms.back() << " (" << latencies_ms.size()
            << " commits)\n";
  CHECK(latencies_ms.back() < 10000);
}
