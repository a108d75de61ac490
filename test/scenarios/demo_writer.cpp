// The demo workload behind deploy/local/run.sh: keeps a topic busy with
// locked increments on a few keys and lock-only reads of new keys (which
// leave headless rows for compactiond to sweep), until SIGINT/SIGTERM or
// --seconds N. Schema and topic come from argv.
#include <csignal>
#include <cstdlib>
#include <iostream>
#include <random>
#include <thread>

#include "scenario.hpp"

namespace {
volatile std::sig_atomic_t stop = 0;
void OnSignal(int) { stop = 1; }

struct Visits {
  static constexpr int kSchemaVersion = 1;
  std::int64_t n = 0;
};
void to_json(nlohmann::json& j, const Visits& v) { j = {{"n", v.n}}; }
void from_json(const nlohmann::json& j, Visits& v) { j.at("n").get_to(v.n); }
}  // namespace

int main(int argc, char** argv) try {
  if (argc < 3) {
    std::cerr << "usage: demo_writer SCHEMA TOPIC [--seconds N]\n";
    return 2;
  }
  const int seconds = (argc >= 5 && std::string(argv[3]) == "--seconds")
                          ? std::atoi(argv[4])
                          : 0;
  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);
  compaction::ClientOptions options;
  options.schema = argv[1];
  options.application_name = "demo_writer";
  auto client = compaction::Client::Connect("", options);
  auto topic = client.Topic<Visits>(argv[2]);
  auto producer = topic.RegisterProducer();
  std::mt19937 random(42);
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  std::int64_t increments = 0;
  std::int64_t lookups = 0;
  while (!stop &&
         (seconds == 0 || std::chrono::steady_clock::now() < deadline)) {
    const auto key = topic.Key("page-" + std::to_string(random() % 10));
    client.InTransaction([&](compaction::Tx& tx) {
      auto head = key.LockCompactionHead(tx);
      producer.ProduceInTx(tx, Visits{(head ? head->message.n : 0) + 1},
                           scenario::Compacted(key.message_key()));
    });
    ++increments;
    // A lookup of a key that never gets a value: a headless row.
    client.InTransaction([&](compaction::Tx& tx) {
      topic.Key("probe-" + std::to_string(lookups++)).LockCompactionHead(tx);
    });
    if (increments % 500 == 0) {
      std::cout << "demo_writer: " << increments << " increments, " << lookups
                << " lock-only lookups" << std::endl;
    }
    std::this_thread::sleep_for(
        std::chrono::milliseconds(20));  // a gentle demo pace
  }
  std::cout << "demo_writer: done, " << increments << " increments"
            << std::endl;
  return 0;
} catch (const std::exception& e) {
  std::cerr << "demo_writer: " << e.what() << "\n";
  return 1;
}
