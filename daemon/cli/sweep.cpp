// sweep --once: one pass over every topic: its headless sweep, then its log
// cleaner, each run as `run` runs it (RunJob on a WorkerPool of pool-size
// threads), with a line on stdout per run.
#include <compaction/compaction.hpp>
#include <iostream>

#include "daemon/asio.hpp"
#include "daemon/cli/cli.hpp"
#include "daemon/cli/commands.hpp"
#include "daemon/cli/common.hpp"
#include "daemon/failure.hpp"
#include "daemon/log.hpp"
#include "daemon/scheduler.hpp"
#include "daemon/worker_pool.hpp"

namespace compactiond::cli {
namespace {

std::string Status(const compaction::CompactResult& r) {
  return r.skipped ? "skipped claimed_by=" + Printable(r.claimed_by) : "ok";
}

// One pass. The pool's threads run the jobs; the rest (printing, the tally)
// runs on the thread that calls Run(), so it needs no lock.
class SweepPass {
 public:
  SweepPass(compaction::Client& client, const Settings& s)
      : client_(client),
        schedule_(ScheduleSettings::From(s)),
        pool_(io_, s.pool_size) {}

  // Returns how many topics failed (their sweep, or else their cleaner).
  int Run(const std::vector<compaction::TopicInfo>& topics) {
    pending_ = topics.size();
    if (pending_ == 0) return 0;
    for (const auto& t : topics) Submit(t.name, 0);
    io_.run();
    return failed_;
  }

 private:
  // The topic's job number `step` of kJobs, run one after the other.
  void Submit(const std::string& topic, size_t step) {
    const Job job = kJobs[step];
    pool_.Submit(
        [this, topic, job] {
          compaction::Janitor janitor(client_);
          return RunJob(janitor, topic, job, schedule_.OptionsFor(job));
        },
        [this, topic, step](Outcome<compaction::CompactResult> out) {
          OnDone(topic, step, out);
        });
  }

  // A failed sweep skips the topic's cleaner, as a failed run would.
  void OnDone(const std::string& topic, size_t step,
              const Outcome<compaction::CompactResult>& out) {
    if (!out.ok()) {
      ++failed_;
      LogError("sweep", "sweep failed",
               {{"topic", topic}, {"error", Describe(out.error)}});
      std::cout << "topic=" << Printable(topic) << " status=failed\n";
    } else {
      std::cout << "topic=" << Printable(topic) << " "
                << RunSummary(kJobs[step], *out.value)
                << " status=" << Status(*out.value) << "\n";
      if (step + 1 < kJobs.size()) return Submit(topic, step + 1);
    }
    if (--pending_ == 0) work_.reset();  // io_.run() returns
  }

  compaction::Client& client_;
  const ScheduleSettings schedule_;
  asio::io_context io_;
  asio::executor_work_guard<asio::io_context::executor_type> work_{
      io_.get_executor()};
  WorkerPool pool_;     // last: joins before io_ goes
  size_t pending_ = 0;  // topics not finished
  int failed_ = 0;
};

}  // namespace

int SweepOnce(const Settings& s) {
  compaction::Client client = Connect(s);
  const std::vector<compaction::TopicInfo> topics = client.ListTopics();
  const int failed = SweepPass(client, s).Run(topics);
  std::cout.flush();
  LogInfo("sweep", "pass finished",
          {{"topics", static_cast<std::int64_t>(topics.size())},
           {"failed", failed}});
  return failed == 0 ? kExitOk : kExitFailure;
}

}  // namespace compactiond::cli
