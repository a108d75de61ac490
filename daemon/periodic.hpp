// PeriodicJob: runs one database job on the WorkerPool every `period`, and
// on demand (Trigger), never two at once: a trigger while one runs queues
// exactly one more run. Used for the topic list and the statistics refresh.
//
// Lifetime: owned by the App; Stop() before destruction. Thread safety:
// io_context thread only.
#pragma once

#include <compaction/client.hpp>
#include <functional>
#include <memory>

#include "daemon/asio.hpp"
#include "daemon/config.hpp"
#include "daemon/database.hpp"
#include "daemon/worker_pool.hpp"

namespace compactiond {

template <class T>
class PeriodicJob {
 public:
  // work(client) runs on a worker; done(outcome, client) on the io_context.
  using Work = std::function<T(compaction::Client&)>;
  using Done = std::function<void(Outcome<T>&,
                                  const std::shared_ptr<compaction::Client>&)>;

  PeriodicJob(asio::io_context& io, WorkerPool& pool, Database& db,
              Millis period, Work work, Done done)
      : pool_(pool),
        db_(db),
        timer_(io),
        period_(period),
        work_(std::move(work)),
        done_(std::move(done)),
        alive_(std::make_shared<bool>(true)) {}
  ~PeriodicJob() { *alive_ = false; }

  void Start() { Trigger(); }
  void Stop() {
    stopped_ = true;
    timer_.cancel();
  }
  void SetPeriod(Millis period) { period_ = period; }
  // Runs on demand start at least this far apart (default 0): a trigger
  // sooner runs once the spacing is over. The topic list is triggered by
  // NOTIFY, which any role that can connect may send in a loop.
  void SetMinSpacing(Millis spacing) { min_spacing_ = spacing; }

  // Runs the job now (or right after the one in flight).
  void Trigger() {
    if (stopped_ || spaced_) return;  // a spaced run is already due
    if (running_) {
      pending_ = true;
      return;
    }
    const auto since = std::chrono::steady_clock::now() - last_start_;
    if (since < min_spacing_) {
      spaced_ = true;
      Rearm(std::chrono::duration_cast<Millis>(min_spacing_ - since) +
            Millis(1));
      return;
    }
    std::shared_ptr<compaction::Client> client = db_.client();
    if (!client) {
      Rearm(period_);  // the link's on_up triggers us on reconnect
      return;
    }
    running_ = true;
    last_start_ = std::chrono::steady_clock::now();
    pool_.Submit([work = work_, client] { return work(*client); },
                 [this, alive = alive_, client](Outcome<T> outcome) {
                   if (!*alive) return;
                   running_ = false;
                   if (stopped_) return;
                   done_(outcome, client);
                   if (!outcome.ok()) db_.ReportError(client, outcome.error);
                   if (pending_) {
                     pending_ = false;
                     Trigger();
                   } else {
                     Rearm(outcome.ok() ? period_ : std::min(period_, retry_));
                   }
                 });
  }

  // Delay before the next run after a failure that was not a lost connection.
  void SetRetry(Millis retry) { retry_ = retry; }

 private:
  void Rearm(Millis delay) {
    timer_.expires_after(delay);
    timer_.async_wait([this](const boost::system::error_code& ec) {
      if (ec) return;
      spaced_ = false;
      Trigger();
    });
  }

  WorkerPool& pool_;
  Database& db_;
  asio::steady_timer timer_;
  Millis period_;
  Millis retry_{std::chrono::seconds(1)};
  Work work_;
  Done done_;
  std::shared_ptr<bool> alive_;
  Millis min_spacing_{0};
  std::chrono::steady_clock::time_point last_start_;
  bool running_ = false;
  bool pending_ = false;
  bool spaced_ = false;  // a run waits out min_spacing_ on the timer
  bool stopped_ = false;
};

}  // namespace compactiond
