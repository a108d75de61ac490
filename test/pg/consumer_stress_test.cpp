// A randomized stress of consumers: producers with random rollbacks and
// commit delays, three instances of one consumer with random rollbacks, and
// the log cleaner and headless janitor running all along. Each Poll's
// transaction records what it delivered in a table of the test, so exactly
// the committed deliveries are recorded, in the order the position moved.
// At the end: every committed message that must be delivered was, once;
// only superseded compacted versions the cleaner removed may be missing;
// applying the head deliveries in order gives every key its current head.
// Bounded by COMPACTION_STRESS_SECONDS (default 15) of load.
#include <libpq-fe.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "live_db.hpp"

using compaction::CompactionOptions;
using compaction::ConsumerOptions;
using compaction::Janitor;
using compaction::ProduceOptions;
using compaction::TopicConfig;
using compaction::Tx;
using testing::Counter;
using testing::LiveDb;
using namespace std::chrono_literals;

namespace {

struct Written {
  bool compacted = false;
  std::string key;
};

int StressSeconds() {
  const char* env = std::getenv("COMPACTION_STRESS_SECONDS");
  return env ? std::max(1, std::atoi(env)) : 15;
}

void Record(Tx& tx, const std::string& table,
            const std::vector<compaction::Delivery<Counter>>& batch) {
  for (const auto& d : batch) {
    const std::string id = std::to_string(d.id);
    const std::string value =
        d.message ? std::to_string(d.message->value) : std::string();
    const char* params[] = {id.c_str(), d.head ? "t" : "f",
                            d.message_key.c_str(),
                            d.message ? value.c_str() : nullptr};
    PGresult* r =
        PQexecParams(tx.native_handle(),
                     ("INSERT INTO " + table +
                      " (id, head, message_key, value) VALUES ($1, $2, $3, $4)")
                         .c_str(),
                     4, nullptr, params, nullptr, nullptr, 0);
    const bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
    PQclear(r);
    if (!ok) throw std::runtime_error("recording a delivery failed");
  }
}

}  // namespace

TEST_CASE("stress: consumers under producers, rollbacks and the cleaner",
          "[stress]") {
  LiveDb db;
  TopicConfig config;
  config.partitions = 2;
  config.retention = 0ms;
  config.tombstone_retention = 0ms;
  config.headless_ttl = 1ms;
  auto topic = db.client().Topic<Counter>("stress");
  topic.Register(config);
  const std::string delivered = db.QuotedSchema() + ".delivered";
  db.raw().Query("CREATE TABLE " + delivered +
                 " (seq bigserial PRIMARY KEY, id bigint NOT NULL, head "
                 "boolean NOT NULL, message_key text, value bigint)");

  std::atomic<bool> producing{true};
  std::atomic<bool> consuming{true};
  std::mutex mutex;
  std::map<std::int64_t, Written> committed;
  std::atomic<int> consumer_rollbacks{0};
  std::atomic<int> producer_rollbacks{0};
  std::string failure;  // the first error a thread met
  auto Fail = [&](const std::string& what) {
    std::lock_guard<std::mutex> lock(mutex);
    if (failure.empty()) failure = what;
  };

  auto client = db.NewClient(12);
  // The consumer's positions are stored before anything is produced: with
  // retention 0 the cleaner may drop any non-head message that no stored
  // consumer still needs, and a consumer whose first Poll has not committed
  // yet (or was rolled back) holds nothing back.
  {
    auto consumer = client.Topic<Counter>("stress").Consumer("c");
    Tx tx = client.Begin();
    REQUIRE(consumer.Poll(tx).empty());
    tx.Commit();
  }
  std::vector<std::thread> threads;
  for (int p = 0; p < 3; ++p) {
    threads.emplace_back([&, p] {
      std::mt19937 rng(1000 + p);
      auto producer = client.Topic<Counter>("stress").RegisterProducer();
      std::int64_t n = 0;
      while (producing) try {
          Tx tx = client.Begin();
          std::vector<std::pair<std::int64_t, Written>> mine;
          const int count = 1 + static_cast<int>(rng() % 3);
          for (int i = 0; i < count; ++i) {
            Written w;
            const int kind = static_cast<int>(rng() % 10);
            const std::string key = "k" + std::to_string(rng() % 12);
            std::int64_t id = 0;
            if (kind < 2) {
              id = producer.ProduceInTx(tx, Counter{++n}).id;
            } else if (kind < 3) {
              w.key = key;
              id = producer
                       .ProduceInTx(tx, Counter{++n},
                                    ProduceOptions{key, std::nullopt})
                       .id;
            } else if (kind < 4) {
              w.compacted = true;
              w.key = key;
              id = producer
                       .ProduceTombstoneInTx(
                           tx, key,
                           CompactionOptions{
                               static_cast<std::int64_t>(rng() % 4)})
                       .id;
            } else {
              w.compacted = true;
              w.key = key;
              id = producer
                       .ProduceInTx(
                           tx, Counter{++n},
                           ProduceOptions{
                               key, CompactionOptions{static_cast<std::int64_t>(
                                        rng() % 4)}})
                       .id;
            }
            mine.emplace_back(id, w);
          }
          std::this_thread::sleep_for(std::chrono::microseconds(rng() % 4000));
          if (rng() % 5 == 0) {
            tx.Rollback();
            ++producer_rollbacks;
            continue;
          }
          tx.Commit();
          std::lock_guard<std::mutex> lock(mutex);
          for (auto& [id, w] : mine) committed[id] = w;
        } catch (const compaction::RetryableError&) {
          ++producer_rollbacks;  // writers of several keys can deadlock
        } catch (const std::exception& e) {
          Fail(e.what());
        }
    });
  }
  for (int c = 0; c < 3; ++c) {
    threads.emplace_back([&, c] {
      std::mt19937 rng(2000 + c);
      auto consumer = client.Topic<Counter>("stress").Consumer(
          "c", ConsumerOptions{1 + static_cast<int>(rng() % 20), false});
      while (consuming) try {
          Tx tx = client.Begin();
          auto batch = consumer.Poll(tx);
          Record(tx, delivered, batch);
          std::this_thread::sleep_for(std::chrono::microseconds(rng() % 2000));
          if (rng() % 4 == 0) {
            tx.Rollback();
            ++consumer_rollbacks;
          } else {
            tx.Commit();
          }
          if (batch.empty()) consumer.Wait(50ms);
        } catch (const std::exception& e) {
          Fail(e.what());
        }
    });
  }
  threads.emplace_back([&] {
    Janitor janitor(client);
    while (consuming) try {
        janitor.CompactLog("stress");
        janitor.SweepHeadless("stress");
        std::this_thread::sleep_for(20ms);
      } catch (const std::exception& e) {
        Fail(e.what());
      }
  });

  std::this_thread::sleep_for(std::chrono::seconds(StressSeconds()));
  producing = false;
  for (int p = 0; p < 3; ++p) threads[p].join();
  // Drain: until the consumer's positions have nothing new (bounded).
  auto probe = client.Topic<Counter>("stress").Consumer("c");
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while (probe.Wait(200ms) && std::chrono::steady_clock::now() < deadline) {
  }
  std::this_thread::sleep_for(100ms);
  while (probe.Wait(200ms) && std::chrono::steady_clock::now() < deadline) {
  }
  consuming = false;
  for (std::size_t i = 3; i < threads.size(); ++i) threads[i].join();

  CHECK(failure.empty());
  // No duplicates.
  CHECK(db.raw().Int("SELECT count(*) - count(DISTINCT id) FROM " +
                     delivered) == 0);
  std::set<std::int64_t> got;
  for (auto& row : db.raw().Query("SELECT id FROM " + delivered)) {
    got.insert(std::stoll(*row[0]));
  }
  std::set<std::int64_t> in_log;
  for (auto& row :
       db.raw().Query("SELECT id FROM " + db.MessageTable("stress"))) {
    in_log.insert(std::stoll(*row[0]));
  }
  int missing = 0;
  int removed_superseded = 0;
  for (const auto& [id, w] : committed) {
    if (got.count(id)) continue;
    // Only a compacted version the cleaner removed may be skipped.
    if (w.compacted && !in_log.count(id)) {
      ++removed_superseded;
      continue;
    }
    ++missing;
    UNSCOPED_INFO("committed message " << id << " never delivered");
  }
  CHECK(missing == 0);
  for (auto id : got) CHECK(committed.count(id) == 1);  // no rolled-back one
  // Per-key order: the last head delivery of each key is its current head.
  std::map<std::string, std::optional<std::int64_t>> state;
  for (auto& row : db.raw().Query("SELECT message_key, value FROM " +
                                  delivered + " WHERE head ORDER BY seq")) {
    state[*row[0]] = row[1] ? std::optional(std::stoll(*row[1])) : std::nullopt;
  }
  for (auto& [key, value] : state) {
    auto head = topic.Key(key).CompactionHead();
    INFO(key);
    CHECK(value == (head ? std::optional(head->message.value) : std::nullopt));
  }
  std::cout << "stress: " << committed.size() << " committed, " << got.size()
            << " delivered, " << removed_superseded
            << " superseded removed first, " << producer_rollbacks
            << " produce and " << consumer_rollbacks << " Poll rollbacks\n";
  CHECK(committed.size() > 100);
}
