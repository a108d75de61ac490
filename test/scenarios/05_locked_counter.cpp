// Scenario 05: name the topic and key handles once, lock
// through the key, then produce through the registered producer in the same
// transaction: a concurrent counter that never loses an increment, even on a
// key that has no value yet.
#include <thread>
#include <vector>

#include "scenario.hpp"

struct Count {
  static constexpr int kSchemaVersion = 1;
  std::int64_t n = 0;
};
void to_json(nlohmann::json& j, const Count& c) { j = {{"n", c.n}}; }
void from_json(const nlohmann::json& j, Count& c) { j.at("n").get_to(c.n); }

int main() try {
  using namespace scenario;
  auto client = Open("05");
  auto topic =
      client.Topic<Count>("page-views");  // the topic handle, named once
  topic.Register();
  auto producer = topic.RegisterProducer();
  const auto key = topic.Key("home");  // the key handle, named once

  constexpr int kThreads = 6;
  constexpr int kIncrements = 50;
  std::vector<std::thread> workers;
  for (int t = 0; t < kThreads; ++t) {
    workers.emplace_back([&] {
      for (int i = 0; i < kIncrements; ++i) {
        client.InTransaction([&](compaction::Tx& tx) {
          auto head = key.LockCompactionHead(tx);  // nullopt: no value yet
          const std::int64_t next = (head ? head->message.n : 0) + 1;
          producer.ProduceInTx(tx, Count{next}, Compacted(key.message_key()));
        });
      }
    });
  }
  for (auto& w : workers) w.join();
  const auto head = key.CompactionHead();
  const std::int64_t expected = kThreads * kIncrements;
  std::cout << kThreads << " threads x " << kIncrements
            << " locked increments on a new key: "
            << (head ? head->message.n : 0) << " (expected " << expected
            << ")\n";
  if (!head || head->message.n != expected) return Fail("lost increments");
  Close(client);
  std::cout << "scenario 05 ok\n";
  return 0;
} catch (const std::exception& e) {
  return scenario::Fail(e.what());
}
