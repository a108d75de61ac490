// Scheduler: two steady_timers per topic, one per job: the headless sweep
// and the log cleaner. Each expiry runs one run of that job on the
// WorkerPool and re-arms the timer when it completes, so a job never runs
// twice at once on a topic (the two jobs may run side by side: each has its
// own claim).
//
// Sweep interval of a topic: clamp(ttl / 2, min-interval, max-interval);
// cleaner interval: clamp(min(retention, tombstone retention) / 2,
// cleaner-min-interval, cleaner-max-interval), no timer when both are
// kKeepForever. Each delay is the interval minus a random share of up to
// `jitter` of it (so replicas and topics drift apart and never exceed the
// interval). A sweep deletes every row expired when its batch runs, so an
// expired, unlocked headless row is gone within TTL + interval (plus the
// sweep's own run time and any wait for a free worker); likewise a message
// out of retention is gone within retention + cleaner interval. A run that
// stopped at max-batches with work left is continued after its batch pause
// (at once when it is 0), so pacing holds across the runs of a backlog too.
//
// Lifetime: owned by the App; Stop() before destruction, then wait for
// in_flight() to reach 0. Thread safety: io_context thread only, except
// CancelInFlight(), which may be called from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <compaction/janitor.hpp>
#include <compaction/options.hpp>
#include <map>
#include <memory>
#include <random>
#include <stop_token>
#include <string>
#include <vector>

#include "daemon/asio.hpp"
#include "daemon/config.hpp"
#include "daemon/database.hpp"
#include "daemon/job.hpp"
#include "daemon/metrics.hpp"
#include "daemon/worker_pool.hpp"

namespace compactiond {

struct ScheduleSettings {
  Millis min_interval;
  Millis max_interval;
  double jitter = 0.1;
  compaction::SweepOptions sweep;
  Millis cleaner_min_interval;
  Millis cleaner_max_interval;
  compaction::SweepOptions cleaner;

  static ScheduleSettings From(const Settings& s);
  Millis IntervalFor(Millis ttl) const;
  // 0 when the topic keeps messages and tombstones forever: no cleaner.
  Millis CleanerIntervalFor(const compaction::TopicInfo& topic) const;
  const compaction::SweepOptions& OptionsFor(Job job) const;
  // The job's interval on `topic`; 0: the job is off for it.
  Millis IntervalOf(const compaction::TopicInfo& topic, Job job) const;
};

// "sweep" or "cleaner": names the job in logs ("sweep finished").
const char* JobName(Job job);

// One run of `job` on `topic` through `janitor`; blocks (call it on a
// worker thread). The scheduler and `sweep --once` both run jobs this way.
// A stop requested on `stop` cancels it (Janitor::SweepHeadless).
compaction::CompactResult RunJob(compaction::Janitor& janitor,
                                 const std::string& topic, Job job,
                                 const compaction::SweepOptions& options,
                                 std::stop_token stop = {});

// A run's figures as `sweep --once` prints them after "topic=NAME ".
std::string RunSummary(Job job, const compaction::CompactResult& r);

class Scheduler {
 public:
  Scheduler(asio::io_context& io, WorkerPool& pool, Database& db,
            MetricsProbe& probe, ScheduleSettings settings);

  // Replaces the topic set: starts timers for new topics, drops removed ones
  // (and their metric series), re-times topics whose TTL or retentions
  // changed.
  void SetTopics(const std::vector<compaction::TopicInfo>& topics);
  // New settings from a reload; idle timers are re-armed when their interval
  // changed.
  void Reconfigure(ScheduleSettings settings);

  // Cancels every timer; runs in flight go on until CancelInFlight() or
  // their own end.
  void Stop();
  // PQcancel of every run in flight, and of any run that starts after it.
  // Blocks on the network: call it off the io_context thread.
  void CancelInFlight();
  int in_flight() const { return in_flight_; }
  size_t topic_count() const { return topics_.size(); }

 private:
  // One job's timer on one topic.
  struct Timer {
    explicit Timer(asio::io_context& io) : timer(io) {}
    asio::steady_timer timer;
    Millis interval{0};  // 0: the job is off for this topic
    bool running = false;
  };
  struct Topic {
    Topic(asio::io_context& io, compaction::TopicInfo i)
        : info(std::move(i)), timers{Timer(io), Timer(io)} {}
    Timer& of(Job job) { return timers[Index(job)]; }
    compaction::TopicInfo info;
    std::array<Timer, kJobs.size()> timers;
    bool removed = false;
  };
  struct RunReport {
    compaction::CompactResult job;
    bool not_started = false;  // shutdown began before the run could start
  };

  // Sets the job's interval and re-arms its idle timer when it changed.
  void Retime(const std::shared_ptr<Topic>& topic, Job job);
  void Arm(const std::shared_ptr<Topic>& topic, Job job, Millis delay);
  void Start(const std::shared_ptr<Topic>& topic, Job job);
  RunReport Run(compaction::Client& client, const std::string& name, Job job,
                const compaction::SweepOptions& options);
  void OnDone(const std::shared_ptr<Topic>& topic, Job job,
              const std::shared_ptr<compaction::Client>& client,
              std::chrono::steady_clock::time_point started,
              std::int64_t started_unix_us, Outcome<RunReport> outcome);
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

  // Shared with worker threads. stopping_: no new run starts (Stop()).
  // cancel_: every run gets its token, so CancelInFlight's request_stop
  // reaches the runs in flight and any run past the stopping_ check.
  std::atomic<bool> stopping_{false};
  std::stop_source cancel_;
};

}  // namespace compactiond
