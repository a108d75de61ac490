#include "daemon/listener.hpp"

#include <libpq-fe.h>
#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "daemon/log.hpp"
#include "daemon/topic_event.hpp"

namespace compactiond {
namespace {

constexpr int kPollSliceMs = 250;
constexpr auto kConnectTimeout = std::chrono::seconds(10);
// Anyone may NOTIFY on the channel: a flood of bad payloads must not flood
// the log too.
constexpr auto kBadPayloadLogPeriod = std::chrono::seconds(10);

struct ConnClose {
  void operator()(PGconn* c) const { PQfinish(c); }
};
using ConnPtr = std::unique_ptr<PGconn, ConnClose>;
struct ResultClear {
  void operator()(PGresult* r) const { PQclear(r); }
};
using ResultPtr = std::unique_ptr<PGresult, ResultClear>;

std::string ConnError(PGconn* c) {
  std::string e = c ? PQerrorMessage(c) : "out of memory";
  while (!e.empty() && (e.back() == '\n' || e.back() == ' ')) e.pop_back();
  return e;
}

// Waits for `events` on the socket for one slice. -1 on error.
int PollSocket(PGconn* c, short events) {
  pollfd p{PQsocket(c), events, 0};
  return ::poll(&p, 1, kPollSliceMs);
}

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

void TopicListener::Start() { thread_ = std::thread([this] { Run(); }); }

void TopicListener::Stop() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

bool TopicListener::Sleep(Millis d) {
  auto until = std::chrono::steady_clock::now() + d;
  while (!stop_ && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(
        std::min<Millis::rep>(kPollSliceMs, d.count())));
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
    if (!Sleep(backoff)) return;
    backoff = std::min(backoff * 2, retry_max_);
  }
}

bool TopicListener::Session() {
  std::vector<const char*> keys;
  std::vector<const char*> values;
  for (const auto& [k, v] : params_) {
    keys.push_back(k.c_str());
    values.push_back(v.c_str());
  }
  keys.push_back(nullptr);
  values.push_back(nullptr);
  ConnPtr conn(PQconnectStartParams(keys.data(), values.data(), 0));
  if (!conn || PQstatus(conn.get()) == CONNECTION_BAD) {
    LogWarn("listener", "connect failed", {{"error", ConnError(conn.get())}});
    return !stop_;
  }
  // Non-blocking connect so that Stop() is never stuck behind a dead host.
  auto deadline = std::chrono::steady_clock::now() + kConnectTimeout;
  PostgresPollingStatusType st = PGRES_POLLING_WRITING;
  while (st != PGRES_POLLING_OK) {
    if (st == PGRES_POLLING_FAILED ||
        std::chrono::steady_clock::now() > deadline) {
      LogWarn("listener", "connect failed", {{"error", ConnError(conn.get())}});
      return !stop_;
    }
    if (stop_) return false;
    int n = PollSocket(conn.get(),
                       st == PGRES_POLLING_READING ? POLLIN : POLLOUT);
    if (n < 0 && errno != EINTR) return !stop_;
    if (n > 0) st = PQconnectPoll(conn.get());
  }
  ResultPtr listen(PQexec(conn.get(), "LISTEN compaction_topics"));
  if (PQresultStatus(listen.get()) != PGRES_COMMAND_OK) {
    LogWarn("listener", "LISTEN failed", {{"error", ConnError(conn.get())}});
    return !stop_;
  }
  LogInfo("listener", "listening", {{"channel", "compaction_topics"}});
  if (callbacks_.on_connection) callbacks_.on_connection(true);
  if (callbacks_.on_topics_changed) callbacks_.on_topics_changed();
  while (!stop_) {
    int n = PollSocket(conn.get(), POLLIN);
    if (n == 0) continue;
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 || PQconsumeInput(conn.get()) == 0) {
      LogWarn("listener", "connection lost", {{"error", ConnError(conn.get())}});
      if (callbacks_.on_connection) callbacks_.on_connection(false);
      return !stop_;
    }
    bool relevant = false;
    while (PGnotify* note = PQnotifies(conn.get())) {
      std::unique_ptr<PGnotify, decltype(&PQfreemem)> guard(note, &PQfreemem);
      relevant = HandleNotification(*note) || relevant;
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

bool TopicListener::HandleNotification(const PGnotify& note) {
  // One bad notification must neither end the thread nor hide the rest.
  try {
    std::string why;
    std::optional<TopicEvent> event = ParseTopicEvent(note.extra, &why);
    if (!event) {
      WarnBadPayload(why, std::strlen(note.extra), note.be_pid);
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
          {{"channel", "compaction_topics"},
           {"reason", why},
           {"bytes", bytes},
           {"sender_pid", sender_pid},
           {"suppressed", suppressed}});
}

}  // namespace compactiond
