#include "sweep/cancel.hpp"

#include <condition_variable>
#include <mutex>
#include <utility>

namespace compaction::sweep {

StatementCanceller::StatementCanceller(pg_conn* conn, std::stop_token stop)
    : cancel_(conn), stop_(std::move(stop)) {}

bool PauseUnlessStopped(std::stop_token stop, std::chrono::milliseconds pause) {
  std::mutex mutex;
  std::condition_variable_any wake;
  std::unique_lock lock(mutex);
  // Nothing but the stop request notifies `wake`.
  return !wake.wait_for(lock, stop, pause,
                        [&stop] { return stop.stop_requested(); });
}

}  // namespace compaction::sweep
