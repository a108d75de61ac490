// Scheduler: one steady_timer per topic; each expiry runs one sweep of that
// topic on the WorkerPool and re-arms the timer when the sweep completes, so
// a topic is never swept twice at once.
//
// Interval of a topic: clamp(ttl / 2, min-interval, max-interval); each delay
// is that interval minus a random share of up to `jitter` of it (so replicas
// and topics drift apart and never exceed the interval). A sweep deletes
// every row expired when its batch runs, so an expired, unlocked headless row
// is gone within TTL + interval (plus the sweep's own run time and any wait
// for a free worker). A sweep that stopped at max-batches with rows left is
// continued after batch-pause (at once when it is 0), so pacing holds across
// the sweeps of a backlog too.
//
// Lifetime: owned by the App; Stop() before destruction, then wait for
// in_flight() to reach 0. Thread safety: io_context thread only, except
// CancelInFlight(), which may be called from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <compaction/janitor.hpp>
#include <compaction/options.hpp>

#include "daemon/asio.hpp"
#include "daemon/config.hpp"
#include "daemon/database.hpp"
#include "daemon/metrics.hpp"
#include "daemon/worker_pool.hpp"

namespace compactiond {

struct ScheduleSettings {
  Millis min_interval;
  Millis max_interval;
  double jitter = 0.1;
  compaction::SweepOptions sweep;

  static ScheduleSettings From(const Settings& s);
  Millis IntervalFor(Millis ttl) const;
};

class Scheduler {
 public:
  Scheduler(asio::io_context& io, WorkerPool& pool, Database& db,
            MetricsProbe& probe, ScheduleSettings settings);

  // Replaces the topic set: starts timers for new topics, drops removed ones
  // (and their metric series), re-times topics whose TTL changed.
  void SetTopics(const std::vector<compaction::TopicInfo>& topics);
  // New settings from a reload; idle timers are re-armed when their interval
  // changed.
  void Reconfigure(ScheduleSettings settings);

  // Cancels every timer; sweeps in flight run on until CancelInFlight() or
  // their own end.
  void Stop();
  // PQcancel of every sweep in flight. Blocks on the network: call it off the
  // io_context thread.
  void CancelInFlight();
  int in_flight() const { return in_flight_; }
  size_t topic_count() const { return topics_.size(); }

 private:
  struct Topic {
    Topic(asio::io_context& io, compaction::TopicInfo i)
        : info(std::move(i)), timer(io) {}
    compaction::TopicInfo info;
    asio::steady_timer timer;
    Millis interval{0};
    bool running = false;
    bool removed = false;
  };
  struct SweepReport {
    compaction::SweepResult result;
    bool not_started = false;  // shutdown began before the sweep could start
  };

  void Arm(const std::shared_ptr<Topic>& topic, Millis delay);
  void StartSweep(const std::shared_ptr<Topic>& topic);
  SweepReport RunSweep(compaction::Client& client, const std::string& name,
                       const compaction::SweepOptions& options);
  void OnSweepDone(const std::shared_ptr<Topic>& topic,
                   const std::shared_ptr<compaction::Client>& client,
                   std::chrono::steady_clock::time_point started,
                   std::int64_t started_unix_us, Outcome<SweepReport> outcome);
  Millis NextDelay(Millis interval);
  Millis FirstDelay(Millis interval);

  asio::io_context& io_;
  WorkerPool& pool_;
  Database& db_;
  MetricsProbe& probe_;
  ScheduleSettings settings_;
  std::map<std::string, std::shared_ptr<Topic>> topics_;
  std::mt19937_64 rng_;
  int in_flight_ = 0;
  bool stopped_ = false;

  // Shared with worker threads: lets CancelInFlight reach running janitors.
  std::atomic<bool> stopping_{false};
  std::mutex janitors_mu_;
  std::set<compaction::Janitor*> janitors_;
};

}  // namespace compactiond
