// sweep --once: one pass over every topic, on pool-size threads.
#include <compaction/compaction.hpp>
#include <iostream>
#include <mutex>
#include <thread>

#include "daemon/cli.hpp"
#include "daemon/cli/commands.hpp"
#include "daemon/cli/common.hpp"
#include "daemon/failure.hpp"
#include "daemon/log.hpp"
#include "daemon/scheduler.hpp"

namespace compactiond::cli {

int SweepOnce(const Settings& s) {
  compaction::Client client = Connect(s);
  std::vector<compaction::TopicInfo> topics = client.ListTopics();
  const ScheduleSettings schedule = ScheduleSettings::From(s);
  std::mutex mu;
  size_t next = 0;
  int failed = 0;
  auto worker = [&] {
    compaction::Janitor janitor(client);
    for (;;) {
      std::string name;
      {
        std::lock_guard lock(mu);
        if (next == topics.size()) return;
        name = topics[next++].name;
      }
      try {
        // The headless sweep, then the log cleaner, each as `run` does.
        compaction::SweepResult r = janitor.SweepHeadless(name, schedule.sweep);
        {
          std::lock_guard lock(mu);
          std::cout << "topic=" << name << " deleted=" << r.deleted
                    << " batches=" << r.batches << " status="
                    << (r.skipped ? "skipped claimed_by=" + r.claimed_by : "ok")
                    << "\n";
        }
        compaction::CompactResult c =
            janitor.CompactLog(name, schedule.cleaner);
        std::lock_guard lock(mu);
        std::cout << "topic=" << name
                  << " cleaner deleted_messages=" << c.deleted_messages
                  << " tombstones_expired=" << c.tombstones_expired
                  << " batches=" << c.batches << " status="
                  << (c.skipped ? "skipped claimed_by=" + c.claimed_by : "ok")
                  << "\n";
      } catch (const std::exception&) {
        std::string error = Describe(std::current_exception());
        std::lock_guard lock(mu);
        ++failed;
        LogError("sweep", "sweep failed", {{"topic", name}, {"error", error}});
        std::cout << "topic=" << name << " status=failed\n";
      }
    }
  };
  std::vector<std::thread> threads;
  for (int i = 0; i < s.pool_size; ++i) threads.emplace_back(worker);
  for (auto& t : threads) t.join();
  std::cout.flush();
  LogInfo("sweep", "pass finished",
          {{"topics", static_cast<std::int64_t>(topics.size())},
           {"failed", failed}});
  return failed == 0 ? kExitOk : kExitFailure;
}

}  // namespace compactiond::cli
