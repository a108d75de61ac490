// Cancelling a connection's running statement from another thread.
#pragma once

#include <memory>

struct pg_conn;
struct pg_cancel;

namespace compaction::pg {

// A cancel request for one connection's running statement (PQgetCancel),
// valid while that connection lives; Send() may run on any thread.
class CancelHandle {
 public:
  explicit CancelHandle(pg_conn* conn);
  // Asks the server to cancel whatever the connection runs now (an idle
  // backend ignores it). Blocks on the network; never throws: a failed
  // request leaves the statement running, as if it came too late.
  void Send() const noexcept;

 private:
  struct Free {
    void operator()(pg_cancel* c) const noexcept;
  };
  std::unique_ptr<pg_cancel, Free> cancel_;  // null when PQgetCancel failed
};

}  // namespace compaction::pg
