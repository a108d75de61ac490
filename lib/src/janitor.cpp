// The Janitor: validates a sweep, runs the headless kind on the shared
// sweep machinery (sweep/loop.hpp) and routes Cancel() to the sweep in
// flight as a stop request.
#include "compaction/janitor.hpp"

#include <mutex>
#include <stop_token>

#include "compaction/client.hpp"
#include "core.hpp"
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
                                   const SweepOptions& options) {
  constexpr const char* kOp = sweep::HeadlessBatches::kOperation;
  detail::ValidateTopicName(kOp, topic_name);
  sweep::ValidateOptions(kOp, options);
  std::lock_guard sweep_lock(in_flight_->sweep_mutex);
  // A Cancel() from here on, even during the claim, stops this sweep; one
  // from before belonged to an earlier sweep.
  std::stop_source stop;
  {
    std::lock_guard lock(in_flight_->mutex);
    in_flight_->stop = stop;
  }
  sweep::HeadlessBatches kind(*core_, options);
  return sweep::RunSweep(*core_, kind, topic_name, options, stop.get_token());
}

}  // namespace compaction
