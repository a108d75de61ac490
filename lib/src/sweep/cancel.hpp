// How a stop request reaches a sweep: it cancels the statement running on
// the sweep's connection, or ends its pause.
//
// The cancel is sent only while the sweep is armed (a statement may run):
// during a pause the connection is idle, and a request the server receives
// late could hit the sweep's closing bookkeeping instead.
#pragma once

#include <chrono>
#include <stop_token>

#include "pg/connection.hpp"

namespace compaction::sweep {

class StatementCanceller {
 public:
  StatementCanceller(pg_conn* conn, std::stop_token stop);

  // Sends the cancel request; blocks on the network.
  struct Send {
    const pg::CancelHandle* cancel;
    void operator()() const noexcept { cancel->Send(); }
  };
  using Armed = std::stop_callback<Send>;

  // While the returned callback lives, a stop request cancels the running
  // statement from the requesting thread; its destruction waits for a
  // cancel in progress. Armed after a stop request, it cancels at once (an
  // idle backend ignores that).
  [[nodiscard]] Armed Arm() const { return Armed(stop_, Send{&cancel_}); }

 private:
  pg::CancelHandle cancel_;
  std::stop_token stop_;
};

// Waits `pause` unless a stop request comes first; false when it did. A
// wait on the token, not a sleep: a shutdown must not wait out a pause.
bool PauseUnlessStopped(std::stop_token stop, std::chrono::milliseconds pause);

}  // namespace compaction::sweep
