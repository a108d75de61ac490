#include "daemon/scheduler.hpp"

#include <algorithm>

#include <compaction/client.hpp>

#include "daemon/failure.hpp"
#include "daemon/log.hpp"

namespace compactiond {
namespace {

std::int64_t UnixMicros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

ScheduleSettings ScheduleSettings::From(const Settings& s) {
  ScheduleSettings out;
  out.min_interval = s.min_interval;
  out.max_interval = s.max_interval;
  out.jitter = s.jitter;
  out.sweep.batch_size = s.batch_size;
  out.sweep.max_batches = s.max_batches;
  out.sweep.statement_timeout = s.statement_timeout;
  out.sweep.claim_ttl = s.claim_ttl;
  out.sweep.batch_pause = s.batch_pause;
  out.sweep.duty_cycle = s.duty_cycle;
  out.sweep.owner = s.owner;
  return out;
}

Millis ScheduleSettings::IntervalFor(Millis ttl) const {
  return std::clamp(ttl / 2, min_interval, max_interval);
}

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
  auto off = static_cast<Millis::rep>(
      static_cast<double>(interval.count()) * share(rng_));
  return interval - Millis(off);
}

Millis Scheduler::FirstDelay(Millis interval) {
  // Spread the first sweeps over one interval so that a thousand topics do
  // not all start at once.
  std::uniform_int_distribution<Millis::rep> pick(0, interval.count());
  return Millis(pick(rng_));
}

void Scheduler::SetTopics(const std::vector<compaction::TopicInfo>& topics) {
  if (stopped_) return;
  std::set<std::string> seen;
  for (const compaction::TopicInfo& info : topics) {
    seen.insert(info.name);
    auto it = topics_.find(info.name);
    if (it == topics_.end()) {
      auto topic = std::make_shared<Topic>(io_, info);
      topic->interval = settings_.IntervalFor(info.headless_ttl);
      topics_.emplace(info.name, topic);
      probe_.AddTopic(info.name, info.headless_ttl);
      LogInfo("scheduler", "topic added",
              {{"topic", info.name},
               {"ttl_ms", static_cast<std::int64_t>(info.headless_ttl.count())},
               {"interval_ms",
                static_cast<std::int64_t>(topic->interval.count())}});
      Arm(topic, FirstDelay(topic->interval));
      continue;
    }
    const std::shared_ptr<Topic>& topic = it->second;
    bool ttl_changed = topic->info.headless_ttl != info.headless_ttl;
    topic->info = info;
    if (ttl_changed) {
      probe_.AddTopic(info.name, info.headless_ttl);
      topic->interval = settings_.IntervalFor(info.headless_ttl);
      LogInfo("scheduler", "topic ttl changed",
              {{"topic", info.name},
               {"ttl_ms", static_cast<std::int64_t>(info.headless_ttl.count())}});
      if (!topic->running) Arm(topic, NextDelay(topic->interval));
    }
  }
  for (auto it = topics_.begin(); it != topics_.end();) {
    if (seen.count(it->first) != 0) {
      ++it;
      continue;
    }
    it->second->removed = true;
    it->second->timer.cancel();
    probe_.RemoveTopic(it->first);
    LogInfo("scheduler", "topic removed", {{"topic", it->first}});
    it = topics_.erase(it);
  }
}

void Scheduler::Reconfigure(ScheduleSettings settings) {
  settings_ = std::move(settings);
  for (auto& [name, topic] : topics_) {
    Millis interval = settings_.IntervalFor(topic->info.headless_ttl);
    if (interval == topic->interval) continue;
    topic->interval = interval;
    LogInfo("scheduler", "topic interval changed",
            {{"topic", name},
             {"interval_ms", static_cast<std::int64_t>(interval.count())}});
    if (!topic->running) Arm(topic, NextDelay(interval));
  }
}

void Scheduler::Stop() {
  stopped_ = true;
  stopping_ = true;
  for (auto& [name, topic] : topics_) topic->timer.cancel();
}

void Scheduler::CancelInFlight() {
  stopping_ = true;
  std::lock_guard lock(janitors_mu_);
  for (compaction::Janitor* j : janitors_) j->Cancel();
}

void Scheduler::Arm(const std::shared_ptr<Topic>& topic, Millis delay) {
  if (stopped_ || topic->removed) return;
  // expires_after cancels a pending wait; its handler sees operation_aborted.
  topic->timer.expires_after(delay);
  topic->timer.async_wait([this, topic](const boost::system::error_code& ec) {
    if (ec || stopped_ || topic->removed || topic->running) return;
    StartSweep(topic);
  });
}

void Scheduler::StartSweep(const std::shared_ptr<Topic>& topic) {
  std::shared_ptr<compaction::Client> client = db_.client();
  if (!client) {
    // Database down: try again after one interval (the link reconnects).
    Arm(topic, NextDelay(topic->interval));
    return;
  }
  topic->running = true;
  ++in_flight_;
  auto started = std::chrono::steady_clock::now();
  std::int64_t started_unix_us = UnixMicros();
  pool_.Submit(
      [this, client, name = topic->info.name, options = settings_.sweep] {
        return RunSweep(*client, name, options);
      },
      [this, topic, client, started,
       started_unix_us](Outcome<SweepReport> outcome) {
        OnSweepDone(topic, client, started, started_unix_us,
                    std::move(outcome));
      });
}

// Runs on a worker thread.
Scheduler::SweepReport Scheduler::RunSweep(
    compaction::Client& client, const std::string& name,
    const compaction::SweepOptions& options) {
  compaction::Janitor janitor(client);
  {
    std::lock_guard lock(janitors_mu_);
    janitors_.insert(&janitor);
  }
  struct Unregister {
    Scheduler* self;
    compaction::Janitor* j;
    ~Unregister() {
      std::lock_guard lock(self->janitors_mu_);
      self->janitors_.erase(j);
    }
  } unregister{this, &janitor};
  // Checked after registering, so a concurrent CancelInFlight either sees
  // this janitor or this check sees the flag.
  if (stopping_) return SweepReport{{}, true};
  return SweepReport{janitor.SweepHeadless(name, options), false};
}

void Scheduler::OnSweepDone(const std::shared_ptr<Topic>& topic,
                            const std::shared_ptr<compaction::Client>& client,
                            std::chrono::steady_clock::time_point started,
                            std::int64_t started_unix_us,
                            Outcome<SweepReport> outcome) {
  --in_flight_;
  topic->running = false;
  std::chrono::duration<double> took = std::chrono::steady_clock::now() - started;
  const std::string& name = topic->info.name;
  auto took_ms = static_cast<std::int64_t>(took.count() * 1000);
  if (!outcome.ok()) {
    if (!topic->removed) probe_.SweepFailed(name, took);
    bool cancelled = stopping_ && IsCancelled(outcome.error);
    Log(cancelled ? LogLevel::kInfo : LogLevel::kWarn, "scheduler",
        cancelled ? "sweep cancelled" : "sweep failed",
        {{"topic", name},
         {"error", Describe(outcome.error)},
         {"duration_ms", took_ms},
         {"started_unix_us", started_unix_us},
         {"finished_unix_us", UnixMicros()}});
    db_.ReportError(client, outcome.error);
    Arm(topic, NextDelay(topic->interval));
    return;
  }
  const SweepReport& report = *outcome.value;
  const compaction::SweepResult& r = report.result;
  if (report.not_started) return;
  if (r.skipped) {
    if (!topic->removed) probe_.SweepSkipped(name);
    LogDebug("scheduler", "sweep skipped",
             {{"topic", name}, {"claimed_by", r.claimed_by}});
  } else {
    if (!topic->removed) {
      probe_.SweepFinished(name, r.deleted, took,
                           !r.cancelled && !r.lost_claim);
    }
    Log(r.deleted > 0 || r.cancelled ? LogLevel::kInfo : LogLevel::kDebug,
        "scheduler", r.cancelled ? "sweep cancelled" : "sweep finished",
        {{"topic", name},
         {"deleted", r.deleted},
         {"batches", r.batches},
         {"stopped_at_limit", r.stopped_at_limit},
         {"duration_ms", took_ms},
         {"started_unix_us", started_unix_us},
         {"finished_unix_us", UnixMicros()}});
  }
  // A sweep cut off at max-batches leaves a backlog: continue right away,
  // after the batch pause the sweep itself skipped after its last batch.
  Arm(topic, r.stopped_at_limit && !r.cancelled ? settings_.sweep.batch_pause
                                                : NextDelay(topic->interval));
}

}  // namespace compactiond
