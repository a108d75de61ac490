#include "daemon/database.hpp"

#include <algorithm>

#include "daemon/failure.hpp"
#include "daemon/log.hpp"

namespace compactiond {

Database::Database(asio::io_context& io, WorkerPool& pool, MetricsProbe& probe,
                   std::map<std::string, std::string> params,
                   compaction::ClientOptions options, Callbacks callbacks)
    : io_(io),
      pool_(pool),
      probe_(probe),
      params_(std::move(params)),
      options_(std::move(options)),
      callbacks_(std::move(callbacks)),
      retry_timer_(io),
      backoff_min_(Settings{}.reconnect_min),
      backoff_max_(Settings{}.reconnect_max),
      backoff_(backoff_min_) {}

void Database::SetBackoff(Millis min, Millis max) {
  backoff_min_ = min;
  backoff_max_ = max;
  backoff_ = std::clamp(backoff_, backoff_min_, backoff_max_);
}

void Database::Start() { Attempt(); }

void Database::Stop() {
  stopped_ = true;
  retry_timer_.cancel();
}

void Database::Attempt() {
  if (connecting_ || stopped_ || client_) return;
  connecting_ = true;
  pool_.Submit(
      [params = params_, options = options_] {
        return std::make_shared<compaction::Client>(
            compaction::Client::Connect(params, options));
      },
      [this](Outcome<std::shared_ptr<compaction::Client>> outcome) {
        OnConnected(std::move(outcome));
      });
}

void Database::OnConnected(
    Outcome<std::shared_ptr<compaction::Client>> outcome) {
  connecting_ = false;
  if (stopped_) return;
  if (!outcome.ok()) {
    ++failed_attempts_;
    LogWarn("database", "connect failed",
            {{"error", Describe(outcome.error)},
             {"attempt", failed_attempts_},
             {"retry_in_ms", static_cast<std::int64_t>(backoff_.count())}});
    RetryLater();
    return;
  }
  client_ = std::move(*outcome.value);
  LogInfo("database", "connected",
          {{"schema", options_.schema},
           {"pool_size", options_.pool_size},
           {"after_attempts", failed_attempts_ + 1}});
  failed_attempts_ = 0;
  backoff_ = backoff_min_;
  probe_.SetUp(true);
  if (callbacks_.on_up) callbacks_.on_up();
}

void Database::RetryLater() {
  retry_timer_.expires_after(backoff_);
  retry_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (!ec) Attempt();
  });
  backoff_ = std::min(backoff_ * 2, backoff_max_);
}

void Database::ReportError(const std::shared_ptr<compaction::Client>& used,
                           const std::exception_ptr& error) {
  if (!used || used != client_ || !IsConnectionError(error)) return;
  LogWarn("database", "connection lost", {{"error", Describe(error)}});
  // Jobs still running keep their own reference; the pool closes with them.
  client_.reset();
  probe_.SetUp(false);
  if (callbacks_.on_down) callbacks_.on_down();
  backoff_ = backoff_min_;
  RetryLater();
}

}  // namespace compactiond
