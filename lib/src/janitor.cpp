// The Janitor: validates a sweep, runs its kind (headless rows or the log
// cleaner) on the shared sweep machinery (sweep/loop.hpp) and routes
// Cancel() to the sweep in flight as a stop request.
#include "compaction/janitor.hpp"

#include <mutex>
#include <stop_token>

#include "compaction/client.hpp"
#include "core.hpp"
#include "sweep/cleaner.hpp"
#include "sweep/headless.hpp"
#include "sweep/loop.hpp"
#include "sweep/pacing.hpp"
#include "validate.hpp"

namespace compaction {

// What Cancel() needs to reach the sweep in flight.
struct Janitor::InFlight {
  // Held for a whole sweep: one sweep at a time per Janitor.
  std::mutex sweep_mutex;
  std::mutex mutex;  // guards `stop`
  // The latest sweep's; each sweep gets a fresh one, so a stop requested
  // with no sweep in flight reaches no later sweep.
  std::stop_source stop{std::nostopstate};

  // Runs `kind` over `topic_name` as the Janitor's sweep in flight.
  // A stop requested on `caller` stops it too.
  SweepResult Run(detail::ClientCore& core, sweep::BatchKind& kind,
                  const std::string& topic_name, const SweepOptions& options,
                  std::stop_token caller) {
    std::lock_guard sweep_lock(sweep_mutex);
    // A Cancel() from here on, even during the claim, stops this sweep; one
    // from before belonged to an earlier sweep.
    std::stop_source fresh;
    {
      std::lock_guard lock(mutex);
      stop = fresh;
    }
    // Runs at once when `caller` is already stopped.
    std::stop_callback forward(caller, [&fresh] { fresh.request_stop(); });
    return sweep::RunSweep(core, kind, topic_name, options, fresh.get_token());
  }
};

Janitor::Janitor(Client& client)
    : core_(client.core()), in_flight_(std::make_shared<InFlight>()) {}

Janitor::~Janitor() = default;

void Janitor::Cancel() {
  std::stop_source stop;
  {
    std::lock_guard lock(in_flight_->mutex);
    stop = in_flight_->stop;
  }
  // Runs the sweep's stop callbacks here: PQcancel while a statement may
  // run, the pause's wake-up while it pauses.
  stop.request_stop();
}

SweepResult Janitor::SweepHeadless(const std::string& topic_name,
                                   const SweepOptions& options,
                                   std::stop_token stop) {
  constexpr const char* kOp = sweep::HeadlessBatches::kOperation;
  detail::ValidateTopicName(kOp, topic_name);
  sweep::ValidateOptions(kOp, options);
  sweep::HeadlessBatches kind(*core_, options);
  return in_flight_->Run(*core_, kind, topic_name, options, std::move(stop));
}

CompactResult Janitor::CompactLog(const std::string& topic_name,
                                  const SweepOptions& options,
                                  std::stop_token stop) {
  constexpr const char* kOp = sweep::CleanerBatches::kOperation;
  detail::ValidateTopicName(kOp, topic_name);
  sweep::ValidateOptions(kOp, options);
  sweep::CleanerBatches kind(*core_, options);
  SweepResult r =
      in_flight_->Run(*core_, kind, topic_name, options, std::move(stop));
  // A full pass that recorded no progress and deleted nothing leaves no
  // backlog a continuation would shrink: the next pass walks the same rows
  // to the same end (CleanerBatches::stalled says when). Not "stopped at
  // the limit", so a scheduler waits its interval instead of looping.
  if (r.stopped_at_limit && r.deleted == 0 && kind.tombstones_expired() == 0 &&
      kind.stalled()) {
    r.stopped_at_limit = false;
  }
  return CompactResult{std::move(r), kind.tombstones_expired()};
}

}  // namespace compaction
