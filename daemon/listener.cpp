#include "daemon/listener.hpp"

#include <algorithm>
#include <chrono>
#include <compaction/errors.hpp>
#include <exception>
#include <optional>
#include <string>
#include <vector>

#include "daemon/conninfo.hpp"
#include "daemon/failure.hpp"
#include "daemon/log.hpp"

namespace compactiond {
namespace {

constexpr auto kPollSlice = std::chrono::milliseconds(250);
constexpr auto kConnectTimeout = std::chrono::seconds(10);
// Anyone may NOTIFY on the channel: a flood of bad payloads must not flood
// the log too.
constexpr auto kBadPayloadLogPeriod = std::chrono::seconds(10);

}  // namespace

TopicListener::TopicListener(std::map<std::string, std::string> params,
                             std::string schema, Millis retry_min,
                             Millis retry_max, Callbacks callbacks)
    : params_(std::move(params)),
      schema_(std::move(schema)),
      retry_min_(retry_min),
      retry_max_(retry_max),
      callbacks_(std::move(callbacks)),
      bad_payload_throttle_(kBadPayloadLogPeriod) {}

TopicListener::~TopicListener() { Stop(); }

void TopicListener::Start() {
  thread_ = std::thread([this] { Run(); });
}

void TopicListener::Stop() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

bool TopicListener::Sleep(Millis d) {
  auto until = std::chrono::steady_clock::now() + d;
  while (!stop_ && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(
        std::min<Millis::rep>(kPollSlice.count(), d.count())));
  }
  return !stop_;
}

void TopicListener::Run() {
  Millis backoff = retry_min_;
  while (!stop_) {
    auto began = std::chrono::steady_clock::now();
    // An exception escaping this thread would call std::terminate; a
    // failed session is retried like a lost connection instead.
    try {
      if (!Session()) return;
    } catch (...) {
      SessionFailed(std::current_exception());
    }
    // A connection that lived a while earns a fresh, short backoff.
    if (std::chrono::steady_clock::now() - began > std::chrono::seconds(30)) {
      backoff = retry_min_;
    }
    // Refused credentials: as slowly as the database link retries.
    const Millis cap =
        refused_ ? std::max(retry_max_, kAuthBackoffMax) : retry_max_;
    if (refused_) backoff = std::max(backoff, kAuthBackoffMin);
    if (!Sleep(backoff)) return;
    backoff = std::min(backoff * 2, cap);
  }
}

bool TopicListener::Session() {
  std::optional<compaction::TopicEventListener> conn;
  refused_ = false;
  try {
    conn.emplace(params_, LogNotices("postgres"));
    // Bounded here so that Stop() is never stuck behind a dead host.
    const auto deadline = std::chrono::steady_clock::now() + kConnectTimeout;
    while (!conn->Connect(kPollSlice)) {
      if (stop_) return false;
      if (std::chrono::steady_clock::now() > deadline) {
        LogWarn("listener", "connect failed", {{"error", "timed out"}});
        return !stop_;
      }
    }
  } catch (const compaction::ConnectionLost& e) {
    LogWarn("listener", "connect failed", {{"error", e.what()}});
    return !stop_;
  } catch (const compaction::AuthenticationFailed& e) {
    // The database link logs the refusal (and /readyz says it); one line
    // per attempt is enough.
    LogDebug("listener", "connect refused", {{"error", e.what()}});
    refused_ = true;
    return !stop_;
  } catch (const compaction::InvalidArgument& e) {
    // Retrying would find the same: LISTEN does not work here.
    LogDebug("listener", "LISTEN unavailable", {{"error", e.what()}});
    if (callbacks_.on_unavailable) callbacks_.on_unavailable();
    return false;
  }
  LogInfo("listener", "listening",
          {{"channel", compaction::kTopicEventChannel}});
  if (callbacks_.on_connection) callbacks_.on_connection(true);
  if (callbacks_.on_topics_changed) callbacks_.on_topics_changed();
  while (!stop_) {
    std::vector<compaction::TopicEventListener::Notification> notes;
    try {
      notes = conn->Wait(kPollSlice);
    } catch (const compaction::ConnectionLost& e) {
      LogWarn("listener", "connection lost", {{"error", e.what()}});
      if (callbacks_.on_connection) callbacks_.on_connection(false);
      return !stop_;
    }
    bool relevant = false;
    for (const auto& note : notes) {
      relevant = HandleNotification(note) || relevant;
    }
    if (relevant && callbacks_.on_topics_changed) {
      callbacks_.on_topics_changed();
    }
  }
  return false;
}

void TopicListener::SessionFailed(std::exception_ptr error) noexcept {
  try {
    try {
      std::rethrow_exception(error);
    } catch (const std::exception& e) {
      LogError("listener", "session failed", {{"error", e.what()}});
    } catch (...) {
      LogError("listener", "session failed", {{"error", "unknown exception"}});
    }
    if (callbacks_.on_connection) callbacks_.on_connection(false);
  } catch (...) {
    // Nothing left to report it with; the retry loop goes on.
  }
}

bool TopicListener::HandleNotification(
    const compaction::TopicEventListener::Notification& note) {
  // One bad notification must neither end the thread nor hide the rest.
  try {
    const std::optional<compaction::TopicEvent>& event = note.event;
    if (!event) {
      WarnBadPayload(note.why, note.payload_bytes, note.sender_pid);
      return false;
    }
    if (event->schema != schema_) return false;
    LogDebug("listener", "topic event",
             {{"topic", event->topic}, {"event", event->event}});
    return true;
  } catch (const std::exception& e) {
    LogError("listener", "notification handling failed", {{"error", e.what()}});
  } catch (...) {
    LogError("listener", "notification handling failed",
             {{"error", "unknown exception"}});
  }
  return false;
}

// The payload itself is never logged: it is attacker-chosen text of up to
// 8 kB. The sender's backend PID is what an operator needs to find it.
void TopicListener::WarnBadPayload(const std::string& why, std::size_t bytes,
                                   int sender_pid) {
  std::uint64_t suppressed = 0;
  if (!bad_payload_throttle_.Allow(std::chrono::steady_clock::now(),
                                   &suppressed)) {
    return;
  }
  LogWarn("listener", "ignored malformed notification",
          {{"channel", compaction::kTopicEventChannel},
           {"reason", why},
           {"bytes", bytes},
           {"sender_pid", sender_pid},
           {"suppressed", suppressed}});
}

}  // namespace compactiond
