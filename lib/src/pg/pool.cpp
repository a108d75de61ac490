#include "pg/pool.hpp"

#include <algorithm>
#include <string_view>

#include "compaction/errors.hpp"

namespace compaction::pg {

Pool::Pool(ConnParams params, SessionSettings settings,
           std::string application_name, int size,
           std::chrono::milliseconds acquire_timeout, bool prepared_statements,
           const NoticeHandler* notices)
    : params_(std::move(params)),
      settings_(std::move(settings)),
      application_name_(std::move(application_name)),
      size_(size),
      acquire_timeout_(acquire_timeout),
      prepared_statements_(prepared_statements),
      notices_(notices),
      local_settings_(prepared_statements
                          ? std::string()
                          : LocalSettingsSql(params_, settings_, "Connect")) {}

namespace {

// The server's refusals for want of a connection slot (SQLSTATE 53300:
// max_connections, a role's or a database's CONNECTION LIMIT, the slots
// reserved for superusers). libpq gives no SQLSTATE for a failed
// connection, so the server's message is matched: in English, as the
// server sends it before the session's lc_messages applies.
bool OutOfSlots(const ConnectionLost& e) {
  const std::string_view what = e.what();
  return what.find("too many clients") != std::string_view::npos ||
         what.find("too many connections") != std::string_view::npos ||
         what.find("remaining connection slots are reserved") !=
             std::string_view::npos;
}

}  // namespace

Pool::Lease Pool::Acquire(const char* operation) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point deadline = Clock::now() + acquire_timeout_;
  const std::thread::id self = std::this_thread::get_id();
  std::unique_lock lock(mutex_);
  for (;;) {
    // While the server is short of slots, a connection comes back sooner
    // than a new one can be opened: wait for it, and try opening again only
    // once kScarceRetryAfter has passed.
    for (;;) {
      const Clock::time_point now = Clock::now();
      if (!idle_.empty() || MayOpen(now)) break;
      if (now >= deadline) {
        throw PoolTimeout(
            operation,
            scarce_until_ > now
                ? "the server refused more connections (no free slot) and "
                  "none of the " +
                      std::to_string(open_) + " open ones came back within " +
                      std::to_string(acquire_timeout_.count()) + " ms"
                : "all " + std::to_string(size_) +
                      " pooled connections stayed busy for " +
                      std::to_string(acquire_timeout_.count()) +
                      " ms (raise ClientOptions::pool_size, or do not "
                      "wait for a connection while holding all of them)");
      }
      Clock::time_point until = deadline;
      if (open_ < size_ && scarce_until_ > now) {
        until = std::min(until, scarce_until_);
      }
      available_.wait_until(lock, until);
    }
    for (int i; (i = PickIdle(self)) >= 0;) {
      auto conn = std::move(idle_[i]);
      idle_.erase(idle_.begin() + i);
      // One the server ended while it idled (a failover, a terminated
      // backend) is replaced here, before anything is sent on it: a
      // statement sent there would come back as an unknown outcome.
      const bool idled =
          Clock::now() - conn->idle_since() >= kCheckAliveAfterIdle;
      if (idled && !LooksAlive(conn->get())) {
        --open_;
        continue;
      }
      conn->set_last_user(self);
      return Lease(this, std::move(conn));
    }
    if (!MayOpen(Clock::now())) continue;  // the idle ones were dead
    ++open_;
    lock.unlock();
    try {
      auto conn = std::make_unique<Connection>(
          Connect(params_, settings_, application_name_, operation, notices_,
                  startup()),
          prepared_statements_, local_settings_);
      conn->set_last_user(self);
      lock.lock();
      scarce_until_ = {};
      lock.unlock();
      return Lease(this, std::move(conn));
    } catch (const ConnectionLost& e) {
      lock.lock();
      --open_;
      available_.notify_one();
      // Refused for want of a slot while this pool holds others: one of
      // those will come back. With none open there is nothing to wait for.
      if (!OutOfSlots(e) || open_ == 0 || Clock::now() >= deadline) throw;
      scarce_until_ = Clock::now() + kScarceRetryAfter;
    } catch (...) {
      lock.lock();
      --open_;
      available_.notify_one();
      throw;
    }
  }
}

bool Pool::MayOpen(std::chrono::steady_clock::time_point now) const {
  return open_ < size_ && scarce_until_ <= now;
}

int Pool::PickIdle(std::thread::id self) const {
  const int n = static_cast<int>(idle_.size());
  for (int i = n - 1; i >= 0; --i) {
    if (idle_[i]->last_user() == self) return i;
  }
  for (int i = n - 1; i >= 0; --i) {
    if (idle_[i]->last_user() == std::thread::id()) return i;
  }
  // Another thread's connection only when no new one may be opened (the
  // pool is full, or the server short of slots): taking it would send that
  // thread to a third one, and so on down the line.
  return n == 0 || MayOpen(std::chrono::steady_clock::now()) ? -1 : 0;
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
