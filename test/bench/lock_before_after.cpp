// Lock-only transactions (InTransaction + LockCompactionHead) through the
// library, for comparing two builds of it side by side on one server
// (RESULTS.md, run L4: this library against the one issue 26 measured).
// It uses only API both have. Not part of the build; per library build:
//
//   g++ -std=c++20 -O2 -ITREE/lib/include -I"$(pg_config --includedir)"
//     test/bench/lock_before_after.cpp BUILD/lib/libcompaction.a -lpq
//     -o /tmp/lock_new        (one command line per build; TREE and BUILD
//                              that build's source tree and build dir)
//   /tmp/lock_new SCHEMA setup TOPIC          # install, register, 10,000 heads
//   /tmp/lock_new SCHEMA run TOPIC new|existing|hot THREADS SECONDS
//
// Each build needs a schema of its own (the installed schema's fingerprint
// is the build's). run prints one line: the build's tx/s, p50 and p99 in
// us, and the client's CPU per transaction in us (getrusage of the whole
// process). Keys: new = random, never seen; existing = random of the
// 10,000 with a head; hot = one key with a head.
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "compaction/compaction.hpp"

namespace {

struct Counter {
  static constexpr int kSchemaVersion = 1;
  std::int64_t value = 0;
};
void to_json(nlohmann::json& j, const Counter& c) { j = {{"value", c.value}}; }
void from_json(const nlohmann::json& j, Counter& c) {
  j.at("value").get_to(c.value);
}

constexpr int kKeys = 10000;

double CpuSeconds() {
  rusage r{};
  getrusage(RUSAGE_SELF, &r);
  return r.ru_utime.tv_sec + r.ru_stime.tv_sec +
         (r.ru_utime.tv_usec + r.ru_stime.tv_usec) / 1e6;
}

std::string KeyFor(const std::string& keys, std::mt19937_64& rng) {
  if (keys == "hot") return "1";
  if (keys == "existing") return std::to_string(1 + rng() % kKeys);
  return "n" + std::to_string(rng());
}

}  // namespace

int main(int argc, char** argv) {
  using compaction::Client;
  using compaction::ClientOptions;
  if (argc < 4) {
    std::fprintf(stderr,
                 "usage: %s SCHEMA setup TOPIC | SCHEMA run TOPIC "
                 "new|existing|hot THREADS SECONDS\n",
                 argv[0]);
    return 2;
  }
  const std::string schema = argv[1], mode = argv[2], topic_name = argv[3];
  if (mode == "setup") {
    Client client = Client::Connect("", ClientOptions{schema, 1, "lock-ab"});
    client.InstallSchema();
    auto topic = client.Topic<Counter>(topic_name);
    topic.Register();
    auto producer = topic.RegisterProducer();
    for (int k = 1; k <= kKeys; ++k) {
      producer.Produce(
          Counter{0}, compaction::ProduceOptions{
                          std::to_string(k), compaction::CompactionOptions{0}});
    }
    return 0;
  }
  if (mode != "run" || argc < 7) return 2;
  const std::string keys = argv[4];
  const int threads = std::stoi(argv[5]);
  const double seconds = std::stod(argv[6]);
  Client client =
      Client::Connect("", ClientOptions{schema, threads, "lock-ab"});
  auto topic = client.Topic<Counter>(topic_name);
  auto lock_once = [&](const std::string& key) {
    client.InTransaction([&](compaction::Tx& tx) {
      (void)topic.Key(key).LockCompactionHead(tx);
    });
  };
  std::vector<std::vector<double>> latencies(threads);
  std::atomic<bool> start{false}, stop{false};
  std::atomic<int> ready{0};
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      std::mt19937_64 rng(1234 + t);
      lock_once(KeyFor(keys, rng));  // warm-up: connection and PREPAREs
      ++ready;
      while (!start) std::this_thread::yield();
      while (!stop) {
        const std::string key = KeyFor(keys, rng);
        const auto t0 = std::chrono::steady_clock::now();
        lock_once(key);
        latencies[t].push_back(std::chrono::duration<double, std::micro>(
                                   std::chrono::steady_clock::now() - t0)
                                   .count());
      }
    });
  }
  while (ready < threads) std::this_thread::yield();
  const double cpu0 = CpuSeconds();
  const auto t0 = std::chrono::steady_clock::now();
  start = true;
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop = true;
  for (auto& w : workers) w.join();
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
          .count();
  const double cpu = CpuSeconds() - cpu0;
  std::vector<double> all;
  for (const auto& l : latencies) all.insert(all.end(), l.begin(), l.end());
  std::sort(all.begin(), all.end());
  const double n = static_cast<double>(all.size());
  std::printf("%.0f tx/s p50 %.0f us p99 %.0f us client CPU %.1f us/tx\n",
              n / wall, all[all.size() / 2], all[all.size() * 99 / 100],
              1e6 * cpu / n);
  return 0;
}
