// Topic events: Register and Destroy announce every change of a schema's
// topic set with NOTIFY on kTopicEventChannel, payload
//   {"schema": "...", "topic": "...", "event": "registered"|"destroyed"}
// committed with the change. A process that caches the topic list (such as
// a janitor service) listens with TopicEventListener instead of polling.
//
// Any role that can connect may NOTIFY on the channel, so a payload is
// untrusted input: ParseTopicEvent accepts it only when it is a JSON object
// whose three fields are strings of bounded length, and refuses anything
// else (too large, nested too deep, not JSON, not UTF-8, another root type,
// a field missing or of another type) with a short reason that never quotes
// the payload. Unknown extra fields are ignored so that a newer library can
// add some. It never throws for any input except std::bad_alloc.
//
// Notifications sent while no listener is connected are lost: after each
// (re)connect, re-read the topic list.
#pragma once

#include <chrono>
#include <cstddef>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "compaction/export.hpp"
#include "compaction/options.hpp"

namespace compaction {

inline constexpr const char* kTopicEventChannel = "compaction_topics";

struct TopicEvent {
  std::string schema;  // unquoted, as in ClientOptions::schema
  std::string topic;
  std::string event;  // "registered" or "destroyed"
};

// PostgreSQL refuses NOTIFY payloads of 8000 bytes or more; refusing them
// here too keeps the parser's work bounded whatever the server does.
inline constexpr std::size_t kMaxTopicEventBytes = 8000;
// A valid payload has depth 1; a little slack for future fields.
inline constexpr int kMaxTopicEventDepth = 8;
// Schema names are at most 63 bytes, topic names 100; events are short.
inline constexpr std::size_t kMaxTopicEventFieldBytes = 256;

// The event in `payload`, or nullopt with a reason in `*why` (when `why` is
// not null). Pure; thread-safe.
COMPACTION_EXPORT std::optional<TopicEvent> ParseTopicEvent(
    std::string_view payload, std::string* why);

// A dedicated connection that LISTENs on kTopicEventChannel, driven in
// bounded waits so that the owning thread can check for shutdown between
// them (nothing here blocks longer than the slice it is given, not even a
// connect to a dead host).
//
// Lifetime: closes its connection on destruction. Thread safety: one
// thread at a time.
class COMPACTION_EXPORT TopicEventListener {
 public:
  struct Notification {
    std::optional<TopicEvent> event;  // nullopt: refused, see `why`
    std::string why;
    std::size_t payload_bytes = 0;
    int sender_pid = 0;  // the backend that sent it, to find a bad sender
  };

  // Starts a non-blocking connect with libpq keyword -> value `params`
  // (search_path pinned, keepalives and timeouts defaulted as on the
  // library's own connections). Throws ConnectionLost when libpq cannot
  // even start (an unknown keyword, say). The connection's notices (e.g.
  // the server's "terminating connection" on shutdown) go to `notices`,
  // dropped when it is empty; never to stderr.
  explicit TopicEventListener(const std::map<std::string, std::string>& params,
                              NoticeHandler notices = {});
  ~TopicEventListener();
  TopicEventListener(TopicEventListener&&) noexcept;
  TopicEventListener& operator=(TopicEventListener&&) noexcept;

  // Advances the connect, then LISTENs, waiting at most `slice`; true once
  // listening (then a no-op). Throws ConnectionLost when the connect or the
  // LISTEN fails, InvalidArgument when LISTEN cannot work there and retrying
  // will not help: the server refused it on a live connection, or a
  // connection pooler sits in between (the backend's pid is not the one the
  // session reported; behind PgBouncer in transaction mode LISTEN succeeds
  // and nothing ever arrives). The caller bounds the whole connect with its
  // own deadline.
  bool Connect(std::chrono::milliseconds slice);

  // Once listening: waits at most `slice` for notifications on the channel
  // and returns those that arrived (perhaps none). Throws ConnectionLost
  // when the connection is lost.
  std::vector<Notification> Wait(std::chrono::milliseconds slice);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace compaction
