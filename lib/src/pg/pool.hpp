// A bounded pool of libpq connections with thread affinity: a thread gets
// back the connection it used last, as pgbench's connection per thread
// has. Handing out whichever connection was released last (a stack) pairs
// each transaction with a backend another thread just left; on a busy
// machine that costs the server measurably more CPU per transaction
// (test/bench/RESULTS.md, run H).
//
// Lifetime: the pool outlives every Lease (ClientCore owns both the pool and,
// through handles, is kept alive by them). Thread safety: Acquire and Lease
// destruction may run on any thread; one Lease is used by one thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "pg/connection.hpp"

namespace compaction::pg {

// An idle connection is checked for a server-side end (LooksAlive) before it
// is handed out only when it idled at least this long. One that a thread
// hands back and takes again at once is as alive as its last statement
// found it: an end inside that window is no different from one during the
// next statement, which the caller sees and handles anyway. Checking every
// acquire cost reads at 4 threads a fifth of their throughput (RESULTS.md,
// H-ab-alive); a failover leaves connections idle far longer than this.
inline constexpr std::chrono::milliseconds kCheckAliveAfterIdle{5};

// After the server refused a new connection for want of a slot, the pool
// opens none for this long while it holds others: Acquire waits for one of
// those to come back instead (within the acquire timeout).
inline constexpr std::chrono::milliseconds kScarceRetryAfter{1000};

class Connection {
 public:
  // `local_settings`: LocalSettingsSql for a connection opened with
  // StartupOptions::kPerTransaction, else empty. Reads the server's
  // identity (a round trip): what a broken COMMIT on this connection is
  // later checked against; and its default isolation (another one).
  // Throws ConnectionLost.
  Connection(ConnPtr conn, bool prepared_statements,
             std::string local_settings = {})
      : conn_(std::move(conn)),
        prepared_statements_(prepared_statements),
        local_settings_(std::move(local_settings)),
        server_(ReadServerIdentity(conn_.get(), "Connect")),
        read_committed_default_(DefaultIsReadCommitted(conn_.get())) {}
  pg_conn* get() const { return conn_.get(); }
  // The thread that acquired it last; none for a connection never leased.
  std::thread::id last_user() const { return last_user_; }
  void set_last_user(std::thread::id id) { last_user_ = id; }
  // When it was last handed back to (or adopted by) the pool.
  std::chrono::steady_clock::time_point idle_since() const {
    return idle_since_;
  }
  void set_idle_since(std::chrono::steady_clock::time_point t) {
    idle_since_ = t;
  }
  // Without prepared statements the session has no cache: Exec sends the
  // statements unnamed.
  Session session() {
    return Session{conn_.get(), prepared_statements_ ? &cache_ : nullptr,
                   &local_settings_, &server_, read_committed_default_};
  }

 private:
  ConnPtr conn_;
  bool prepared_statements_;
  std::string local_settings_;
  ServerIdentity server_;
  bool read_committed_default_;
  PreparedCache cache_;
  std::thread::id last_user_;
  std::chrono::steady_clock::time_point idle_since_;
};

class Pool {
 public:
  // `notices` (RouteNotices) must outlive the pool. Without prepared
  // statements, computes the per-transaction settings here (LocalSettingsSql):
  // a conninfo `options` that cannot be applied so throws InvalidArgument
  // before any connection opens.
  Pool(ConnParams params, SessionSettings settings,
       std::string application_name, int size,
       std::chrono::milliseconds acquire_timeout, bool prepared_statements,
       const NoticeHandler* notices = nullptr);

  // LocalSettingsSql when the pool's connections are opened for a
  // transaction pooler (no startup `options`), else empty.
  const std::string& local_settings() const { return local_settings_; }

  // A connection on loan; returned to the pool (or closed when it is broken
  // or left inside a transaction that cannot be rolled back) on destruction.
  class Lease {
   public:
    Lease(Pool* pool, std::unique_ptr<Connection> conn)
        : pool_(pool), conn_(std::move(conn)) {}
    Lease(Lease&&) noexcept = default;
    Lease& operator=(Lease&&) = delete;
    ~Lease() {
      if (conn_) pool_->Release(std::move(conn_), discard_);
    }
    // Closes the connection instead of returning it, e.g. when a cancel
    // request may still be on its way to the backend.
    void Discard() { discard_ = true; }
    Connection& operator*() const { return *conn_; }
    Connection* operator->() const { return conn_.get(); }

   private:
    Pool* pool_;
    std::unique_ptr<Connection> conn_;
    bool discard_ = false;
  };

  // Waits for a free connection, opening one lazily while fewer than `size`
  // are open. Prefers, in order: the idle connection this thread used last,
  // one no thread has used, a new one, and then the one idle the longest
  // (whose thread is the least likely to come back for it soon). A server
  // out of connection slots (too many clients, a role's connection limit)
  // is waited out while the pool holds other connections: the caller gets
  // one of those when it comes back. Throws ConnectionLost when a new
  // connection cannot be made (and, for want of slots, none is open),
  // PoolTimeout when none frees up within the acquire timeout.
  Lease Acquire(const char* operation);

  // Without prepared statements the pool serves transaction poolers: its
  // connections send no startup options and set them per transaction.
  StartupOptions startup() const {
    return prepared_statements_ ? StartupOptions::kSend
                                : StartupOptions::kPerTransaction;
  }

  int size() const { return size_; }

 private:
  void Release(std::unique_ptr<Connection> conn, bool discard);
  // The index in idle_ of the connection Acquire should hand to `self`;
  // -1 when it should open a new one instead. Needs mutex_ and a non-empty
  // idle_ or room to open.
  int PickIdle(std::thread::id self) const;
  // Whether Acquire may open a new connection: room in the pool, and the
  // server not short of slots. Needs mutex_.
  bool MayOpen(std::chrono::steady_clock::time_point now) const;

  const ConnParams params_;
  const SessionSettings settings_;
  const std::string application_name_;
  const int size_;
  const std::chrono::milliseconds acquire_timeout_;
  const bool prepared_statements_;
  const NoticeHandler* const notices_;
  const std::string local_settings_;
  std::mutex mutex_;
  std::condition_variable available_;
  // Oldest release first.
  std::vector<std::unique_ptr<Connection>> idle_;
  int open_ = 0;
  // Until when no new connection is opened (kScarceRetryAfter).
  std::chrono::steady_clock::time_point scarce_until_;
};

}  // namespace compaction::pg
