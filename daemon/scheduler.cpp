#include "daemon/scheduler.hpp"

#include <unistd.h>

#include <algorithm>
#include <compaction/client.hpp>
#include <set>
#include <string>

#include "daemon/failure.hpp"
#include "daemon/log.hpp"

namespace compactiond {
namespace {

std::int64_t UnixMicros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The default `owner`: one name for every run of this process. The library's
// default names each sweep apart, so the claim of a run whose connection
// broke mid-batch (a failover) would make this daemon skip the topic as
// another owner's until claim-ttl; under one name the next run takes it
// over. The scheduler runs one sweep and one cleaner pass per topic at a
// time, and their claims are apart, so nothing here needs the per-sweep
// exclusion.
std::string ProcessOwner() {
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  return std::string(host) + ":" + std::to_string(getpid());
}

}  // namespace

namespace {

// One job's options: its own batch size and pacing; max-batches,
// statement-timeout, claim-ttl and owner are shared.
compaction::SweepOptions JobOptions(const Settings& s, int batch_size,
                                    Millis batch_pause, double duty_cycle) {
  compaction::SweepOptions o;
  o.batch_size = batch_size;
  o.max_batches = s.max_batches;
  o.statement_timeout = s.statement_timeout;
  o.claim_ttl = s.claim_ttl;
  o.batch_pause = batch_pause;
  o.duty_cycle = duty_cycle;
  o.owner = s.owner.empty() ? ProcessOwner() : s.owner;
  return o;
}

}  // namespace

ScheduleSettings ScheduleSettings::From(const Settings& s) {
  ScheduleSettings out;
  out.min_interval = s.min_interval;
  out.max_interval = s.max_interval;
  out.jitter = s.jitter;
  out.cleaner_min_interval = s.cleaner_min_interval;
  out.cleaner_max_interval = s.cleaner_max_interval;
  out.sweep = JobOptions(s, s.batch_size, s.batch_pause, s.duty_cycle);
  out.cleaner = JobOptions(s, s.cleaner_batch_size, s.cleaner_batch_pause,
                           s.cleaner_duty_cycle);
  return out;
}

Millis ScheduleSettings::IntervalFor(Millis ttl) const {
  return std::clamp(ttl / 2, min_interval, max_interval);
}

Millis ScheduleSettings::CleanerIntervalFor(
    const compaction::TopicInfo& topic) const {
  const Millis due = std::min(topic.retention, topic.tombstone_retention);
  if (due == compaction::kKeepForever) return Millis(0);
  return std::clamp(due / 2, cleaner_min_interval, cleaner_max_interval);
}

// --- What tells the two jobs apart: the only branches on the job.

const char* JobName(Job job) {
  return job == Job::kSweep ? "sweep" : "cleaner";
}

const compaction::SweepOptions& ScheduleSettings::OptionsFor(Job job) const {
  return job == Job::kSweep ? sweep : cleaner;
}

Millis ScheduleSettings::IntervalOf(const compaction::TopicInfo& topic,
                                    Job job) const {
  return job == Job::kSweep ? IntervalFor(topic.headless_ttl)
                            : CleanerIntervalFor(topic);
}

compaction::CompactResult RunJob(compaction::Janitor& janitor,
                                 const std::string& topic, Job job,
                                 const compaction::SweepOptions& options,
                                 std::stop_token stop) {
  if (job == Job::kSweep) {
    return {janitor.SweepHeadless(topic, options, std::move(stop))};
  }
  return janitor.CompactLog(topic, options, std::move(stop));
}

std::string RunSummary(Job job, const compaction::CompactResult& r) {
  const std::string batches = " batches=" + std::to_string(r.batches);
  if (job == Job::kSweep) {
    return "deleted=" + std::to_string(r.deleted) + batches;
  }
  return "cleaner deleted_messages=" + std::to_string(r.deleted) +
         " tombstones_expired=" + std::to_string(r.tombstones_expired) +
         batches;
}

// ---

Scheduler::Scheduler(asio::io_context& io, WorkerPool& pool, Database& db,
                     MetricsProbe& probe, ScheduleSettings settings)
    : io_(io),
      pool_(pool),
      db_(db),
      probe_(probe),
      settings_(std::move(settings)),
      rng_(std::random_device{}()) {}

Millis Scheduler::NextDelay(Millis interval) {
  std::uniform_real_distribution<double> share(0.0, settings_.jitter);
  auto off = static_cast<Millis::rep>(static_cast<double>(interval.count()) *
                                      share(rng_));
  return interval - Millis(off);
}

Millis Scheduler::FirstDelay(Millis interval) {
  // Spread the first runs over one interval so that a thousand topics do
  // not all start at once.
  std::uniform_int_distribution<Millis::rep> pick(0, interval.count());
  return Millis(pick(rng_));
}

void Scheduler::Retime(const std::shared_ptr<Topic>& topic, Job job) {
  Timer& t = topic->of(job);
  const Millis interval = settings_.IntervalOf(topic->info, job);
  if (interval == t.interval) return;
  const bool was_off = t.interval.count() == 0;
  t.interval = interval;
  LogInfo("scheduler", "topic interval changed",
          {{"topic", topic->info.name},
           {"interval_ms", static_cast<std::int64_t>(interval.count())},
           {"job", JobName(job)}});
  if (interval.count() == 0) {
    t.timer.cancel();
  } else if (!t.running) {
    Arm(topic, job, was_off ? FirstDelay(interval) : NextDelay(interval));
  }
}

void Scheduler::SetTopics(const std::vector<compaction::TopicInfo>& topics) {
  if (stopped_) return;
  std::set<std::string> seen;
  for (const compaction::TopicInfo& info : topics) {
    seen.insert(info.name);
    auto it = topics_.find(info.name);
    if (it == topics_.end()) {
      auto topic = std::make_shared<Topic>(io_, info);
      topics_.emplace(info.name, topic);
      probe_.AddTopic(info);
      for (Job job : kJobs) {
        Timer& t = topic->of(job);
        t.interval = settings_.IntervalOf(info, job);
        if (t.interval.count() > 0) Arm(topic, job, FirstDelay(t.interval));
      }
      LogInfo("scheduler", "topic added",
              {{"topic", info.name},
               {"ttl_ms", static_cast<std::int64_t>(info.headless_ttl.count())},
               {"interval_ms", static_cast<std::int64_t>(
                                   topic->of(Job::kSweep).interval.count())},
               {"cleaner_interval_ms",
                static_cast<std::int64_t>(
                    topic->of(Job::kClean).interval.count())}});
      continue;
    }
    const std::shared_ptr<Topic>& topic = it->second;
    const compaction::TopicInfo before = topic->info;
    topic->info = info;
    if (before.headless_ttl == info.headless_ttl &&
        before.retention == info.retention &&
        before.tombstone_retention == info.tombstone_retention) {
      continue;
    }
    probe_.AddTopic(info);
    LogInfo("scheduler", "topic settings changed",
            {{"topic", info.name},
             {"ttl_ms", static_cast<std::int64_t>(info.headless_ttl.count())}});
    for (Job job : kJobs) Retime(topic, job);
  }
  for (auto it = topics_.begin(); it != topics_.end();) {
    if (seen.count(it->first) != 0) {
      ++it;
      continue;
    }
    it->second->removed = true;
    for (Timer& t : it->second->timers) t.timer.cancel();
    probe_.RemoveTopic(it->first);
    LogInfo("scheduler", "topic removed", {{"topic", it->first}});
    it = topics_.erase(it);
  }
}

void Scheduler::Reconfigure(ScheduleSettings settings) {
  settings_ = std::move(settings);
  for (auto& [name, topic] : topics_) {
    for (Job job : kJobs) Retime(topic, job);
  }
}

void Scheduler::Stop() {
  stopped_ = true;
  stopping_ = true;
  for (auto& [name, topic] : topics_) {
    for (Timer& t : topic->timers) t.timer.cancel();
  }
}

void Scheduler::CancelInFlight() {
  stopping_ = true;
  cancel_.request_stop();
}

void Scheduler::Arm(const std::shared_ptr<Topic>& topic, Job job,
                    Millis delay) {
  Timer& t = topic->of(job);
  if (stopped_ || topic->removed || t.interval.count() == 0) return;
  // expires_after cancels a pending wait; its handler sees operation_aborted.
  t.timer.expires_after(delay);
  t.timer.async_wait([this, topic, job](const boost::system::error_code& ec) {
    if (ec || stopped_ || topic->removed || topic->of(job).running) return;
    Start(topic, job);
  });
}

void Scheduler::Start(const std::shared_ptr<Topic>& topic, Job job) {
  Timer& t = topic->of(job);
  std::shared_ptr<compaction::Client> client = db_.client();
  if (!client) {
    // Database down: try again after one interval (the link reconnects).
    Arm(topic, job, NextDelay(t.interval));
    return;
  }
  t.running = true;
  ++in_flight_;
  auto started = std::chrono::steady_clock::now();
  std::int64_t started_unix_us = UnixMicros();
  pool_.Submit([this, client, job, name = topic->info.name,
                options = settings_.OptionsFor(
                    job)] { return Run(*client, name, job, options); },
               [this, topic, job, client, started,
                started_unix_us](Outcome<RunReport> outcome) {
                 OnDone(topic, job, client, started, started_unix_us,
                        std::move(outcome));
               });
}

// Runs on a worker thread.
Scheduler::RunReport Scheduler::Run(compaction::Client& client,
                                    const std::string& name, Job job,
                                    const compaction::SweepOptions& options) {
  // A CancelInFlight() after this check stops the run through its token.
  RunReport report;
  if (stopping_) {
    report.not_started = true;
    return report;
  }
  compaction::Janitor janitor(client);
  report.job = RunJob(janitor, name, job, options, cancel_.get_token());
  return report;
}

void Scheduler::OnDone(const std::shared_ptr<Topic>& topic, Job job,
                       const std::shared_ptr<compaction::Client>& client,
                       std::chrono::steady_clock::time_point started,
                       std::int64_t started_unix_us,
                       Outcome<RunReport> outcome) {
  --in_flight_;
  Timer& t = topic->of(job);
  t.running = false;
  std::chrono::duration<double> took =
      std::chrono::steady_clock::now() - started;
  const std::string& name = topic->info.name;
  const char* what = JobName(job);
  auto took_ms = static_cast<std::int64_t>(took.count() * 1000);
  if (!outcome.ok()) {
    if (!topic->removed) probe_.RunFailed(job, name, took);
    bool cancelled = stopping_ && IsCancelled(outcome.error);
    Log(cancelled ? LogLevel::kInfo : LogLevel::kWarn, "scheduler",
        std::string(what) + (cancelled ? " cancelled" : " failed"),
        {{"topic", name},
         {"error", Describe(outcome.error)},
         {"duration_ms", took_ms},
         {"started_unix_us", started_unix_us},
         {"finished_unix_us", UnixMicros()}});
    db_.ReportError(client, outcome.error);
    Arm(topic, job, NextDelay(t.interval));
    return;
  }
  if (outcome.value->not_started) return;
  const compaction::CompactResult& r = outcome.value->job;
  if (!topic->removed) probe_.RunFinished(job, name, r, took);
  if (r.skipped) {
    LogDebug("scheduler", std::string(what) + " skipped",
             {{"topic", name}, {"claimed_by", r.claimed_by}});
  } else {
    Log(r.deleted > 0 || r.tombstones_expired > 0 || r.cancelled
            ? LogLevel::kInfo
            : LogLevel::kDebug,
        "scheduler",
        std::string(what) + (r.cancelled ? " cancelled" : " finished"),
        {{"topic", name},
         {"deleted", r.deleted},
         {"tombstones_expired", r.tombstones_expired},
         {"batches", r.batches},
         {"stopped_at_limit", r.stopped_at_limit},
         {"duration_ms", took_ms},
         {"started_unix_us", started_unix_us},
         {"finished_unix_us", UnixMicros()}});
  }
  // A run cut off at max-batches leaves a backlog: continue right away,
  // after the batch pause the run itself skipped after its last batch.
  const bool backlog = r.stopped_at_limit && !r.cancelled;
  Arm(topic, job,
      backlog ? settings_.OptionsFor(job).batch_pause : NextDelay(t.interval));
}

}  // namespace compactiond
