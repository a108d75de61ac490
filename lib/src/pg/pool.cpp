#include "pg/pool.hpp"

#include "compaction/errors.hpp"

namespace compaction::pg {

Pool::Pool(ConnParams params, std::string application_name, int size,
           std::chrono::milliseconds acquire_timeout, bool prepared_statements,
           const NoticeHandler* notices)
    : params_(std::move(params)),
      application_name_(std::move(application_name)),
      size_(size),
      acquire_timeout_(acquire_timeout),
      prepared_statements_(prepared_statements),
      notices_(notices),
      local_settings_(prepared_statements
                          ? std::string()
                          : LocalSettingsSql(params_, "Connect")) {}

void Pool::Adopt(ConnPtr conn) {
  std::lock_guard lock(mutex_);
  if (open_ >= size_) return;  // conn closes
  RouteNotices(conn.get(), notices_);
  ++open_;
  idle_.push_back(std::make_unique<Connection>(
      std::move(conn), prepared_statements_, local_settings_));
  idle_.back()->set_idle_since(std::chrono::steady_clock::now());
  available_.notify_one();
}

Pool::Lease Pool::Acquire(const char* operation) {
  std::unique_lock lock(mutex_);
  if (!available_.wait_for(lock, acquire_timeout_,
                           [&] { return !idle_.empty() || open_ < size_; })) {
    throw PoolTimeout(operation,
                      "all " + std::to_string(size_) +
                          " pooled connections stayed busy for " +
                          std::to_string(acquire_timeout_.count()) +
                          " ms (raise ClientOptions::pool_size, or do not "
                          "wait for a connection while holding all of them)");
  }
  const std::thread::id self = std::this_thread::get_id();
  for (int i; (i = PickIdle(self)) >= 0;) {
    auto conn = std::move(idle_[i]);
    idle_.erase(idle_.begin() + i);
    // One the server ended while it idled (a failover, a terminated
    // backend) is replaced here, before anything is sent on it: a
    // statement sent there would come back as an unknown outcome.
    const bool idled = std::chrono::steady_clock::now() - conn->idle_since() >=
                       kCheckAliveAfterIdle;
    if (idled && !LooksAlive(conn->get())) {
      --open_;
      continue;
    }
    conn->set_last_user(self);
    return Lease(this, std::move(conn));
  }
  ++open_;
  lock.unlock();
  try {
    auto conn = std::make_unique<Connection>(
        Connect(params_, application_name_, operation, notices_, startup()),
        prepared_statements_, local_settings_);
    conn->set_last_user(self);
    return Lease(this, std::move(conn));
  } catch (...) {
    lock.lock();
    --open_;
    available_.notify_one();
    throw;
  }
}

int Pool::PickIdle(std::thread::id self) const {
  const int n = static_cast<int>(idle_.size());
  for (int i = n - 1; i >= 0; --i) {
    if (idle_[i]->last_user() == self) return i;
  }
  for (int i = n - 1; i >= 0; --i) {
    if (idle_[i]->last_user() == std::thread::id()) return i;
  }
  // Another thread's connection only when no new one may be opened: taking
  // it would send that thread to a third one, and so on down the line.
  return open_ < size_ ? -1 : 0;
}

void Pool::Release(std::unique_ptr<Connection> conn, bool discard) {
  const Session s = conn->session();
  if (discard) {
    conn.reset();
    std::lock_guard lock(mutex_);
    --open_;
    available_.notify_one();
    return;
  }
  // A connection handed back inside a transaction (an exception escaped
  // mid-transaction) is rolled back so the next user starts clean.
  RollbackQuietly(s);
  const bool reusable = s.open() &&
                        s.transaction_status() == TransactionStatus::kIdle &&
                        !s.in_pipeline();
  std::lock_guard lock(mutex_);
  if (reusable) {
    conn->set_idle_since(std::chrono::steady_clock::now());
    idle_.push_back(std::move(conn));
  } else {
    --open_;  // conn closes when it goes out of scope
  }
  available_.notify_one();
}

}  // namespace compaction::pg
