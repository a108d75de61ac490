// Database: the daemon's link to PostgreSQL through one compaction::Client.
//
// Connects on a worker thread and, while the server is unreachable, retries
// with exponential backoff (reconnect-min doubling up to reconnect-max; after
// an authentication failure, 1s doubling up to 1m: see failure.hpp). Any
// component that sees a connection error on the current client reports it
// here; the link then drops that client and reconnects, so the daemon
// recovers by itself when the database returns.
//
// Lifetime: owned by the App; outlives every job it hands a client to (jobs
// hold their own shared_ptr). Thread safety: io_context thread only.
#pragma once

#include <compaction/client.hpp>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "daemon/asio.hpp"
#include "daemon/config.hpp"
#include "daemon/metrics.hpp"
#include "daemon/worker_pool.hpp"

namespace compactiond {

class Database {
 public:
  struct Callbacks {
    std::function<void()> on_up;    // a new client is connected
    std::function<void()> on_down;  // the client was dropped
  };

  Database(asio::io_context& io, WorkerPool& pool, MetricsProbe& probe,
           std::map<std::string, std::string> params,
           compaction::ClientOptions options, Callbacks callbacks);

  void Start();
  void Stop();
  void SetBackoff(Millis min, Millis max);

  // The connected client, or null while the database is down.
  const std::shared_ptr<compaction::Client>& client() const { return client_; }
  bool up() const { return client_ != nullptr; }
  // Why the link is down, for /readyz: "database unreachable", or
  // "database authentication failed for role \"R\"".
  std::string down_reason() const;

  // Reports a failed operation on `used`. A connection error on the current
  // client takes the link down and schedules a reconnect; other errors are
  // the caller's business.
  void ReportError(const std::shared_ptr<compaction::Client>& used,
                   const std::exception_ptr& error);

 private:
  void Attempt();
  void OnConnected(Outcome<std::shared_ptr<compaction::Client>> outcome);
  void RetryLater(Millis cap);
  void AuthenticationRefused(const std::string& role,
                             const std::exception_ptr& error);

  asio::io_context& io_;
  WorkerPool& pool_;
  MetricsProbe& probe_;
  const std::map<std::string, std::string> params_;
  const compaction::ClientOptions options_;
  Callbacks callbacks_;
  asio::steady_timer retry_timer_;
  Millis backoff_min_;
  Millis backoff_max_;
  Millis backoff_;
  std::shared_ptr<compaction::Client> client_;
  bool connecting_ = false;
  bool stopped_ = false;
  int failed_attempts_ = 0;
  std::optional<std::string> refused_role_;  // set while auth is refused
};

}  // namespace compactiond
