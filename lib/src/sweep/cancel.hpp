// How a stop request reaches a sweep: it cancels the statement running on
// the sweep's connection, or ends its pause.
//
// The cancel is sent only while the sweep is armed (a statement may run):
// during a pause the connection is idle, and a request the server receives
// late could hit the sweep's closing bookkeeping instead.
// TODO(issue 13, item 4): the libpq cancel belongs in pg/ once
// pg::Connection has an RAII cancel handle.
#pragma once

#include <libpq-fe.h>

#include <chrono>
#include <memory>
#include <stop_token>

namespace compaction::sweep {

class StatementCanceller {
 public:
  StatementCanceller(PGconn* conn, std::stop_token stop);

  // Sends PQcancel for the connection; blocks on the network.
  struct Send {
    PGcancel* cancel;
    void operator()() const noexcept;
  };
  using Armed = std::stop_callback<Send>;

  // While the returned callback lives, a stop request cancels the running
  // statement from the requesting thread; its destruction waits for a
  // cancel in progress. Armed after a stop request, it cancels at once (an
  // idle backend ignores that).
  [[nodiscard]] Armed Arm() const { return Armed(stop_, Send{cancel_.get()}); }

 private:
  struct Free {
    void operator()(PGcancel* c) const noexcept { PQfreeCancel(c); }
  };
  std::unique_ptr<PGcancel, Free> cancel_;
  std::stop_token stop_;
};

// Waits `pause` unless a stop request comes first; false when it did. A
// wait on the token, not a sleep: a shutdown must not wait out a pause.
bool PauseUnlessStopped(std::stop_token stop, std::chrono::milliseconds pause);

}  // namespace compaction::sweep
