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
    if (auto role = RefusedRole(outcome.error)) {
      AuthenticationRefused(*role, outcome.error);
      return;
    }
    refused_role_.reset();
    LogWarn("database", "connect failed",
            {{"error", Describe(outcome.error)},
             {"attempt", failed_attempts_},
             {"retry_in_ms", static_cast<std::int64_t>(backoff_.count())}});
    RetryLater(backoff_max_);
    return;
  }
  client_ = std::move(*outcome.value);
  refused_role_.reset();
  LogInfo("database", "connected",
          {{"schema", options_.schema},
           {"pool_size", options_.pool_size},
           {"after_attempts", failed_attempts_ + 1}});
  failed_attempts_ = 0;
  backoff_ = backoff_min_;
  probe_.SetUp(true);
  if (callbacks_.on_up) callbacks_.on_up();
}

void Database::RetryLater(Millis cap) {
  retry_timer_.expires_after(backoff_);
  retry_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (!ec) Attempt();
  });
  backoff_ = std::min(backoff_ * 2, cap);
}

// One line per attempt, and attempts at least a second apart, doubling to
// a minute: the credentials need a person, and retrying at the reconnect
// rate would only fill the log (and the server's).
void Database::AuthenticationRefused(const std::string& role,
                                     const std::exception_ptr& error) {
  refused_role_ = role;
  backoff_ = std::max(backoff_, kAuthBackoffMin);
  LogError("database", "authentication failed; fix the password or pg_hba.conf",
           {{"role", role},
            {"error", Describe(error)},
            {"attempt", failed_attempts_},
            {"retry_in_ms", static_cast<std::int64_t>(backoff_.count())}});
  RetryLater(std::max(backoff_max_, kAuthBackoffMax));
}

std::string Database::down_reason() const {
  if (refused_role_) {
    return "database authentication failed for role \"" + *refused_role_ + "\"";
  }
  return "database unreachable";
}

void Database::ReportError(const std::shared_ptr<compaction::Client>& used,
                           const std::exception_ptr& error) {
  if (!used || used != client_) return;
  // A pool opening a new connection can be refused too (a rotated
  // password): the link is as good as down.
  const auto refused = RefusedRole(error);
  if (!refused && !IsConnectionError(error)) return;
  if (!refused) {
    LogWarn("database", "connection lost", {{"error", Describe(error)}});
  }
  // Jobs still running keep their own reference; the pool closes with them.
  client_.reset();
  probe_.SetUp(false);
  if (callbacks_.on_down) callbacks_.on_down();
  backoff_ = backoff_min_;
  if (refused) {
    ++failed_attempts_;
    AuthenticationRefused(*refused, error);
    return;
  }
  RetryLater(backoff_max_);
}

}  // namespace compactiond
