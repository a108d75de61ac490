// Parsing of the payloads of NOTIFY compaction_topics. The library sends
//   {"schema": "...", "topic": "...", "event": "registered"|"destroyed"}
// but any role that can connect may NOTIFY on the channel, so the payload is
// untrusted input: ParseTopicEvent accepts it only when it is a JSON object
// whose three fields are strings of bounded length, and refuses anything else
// (too large, nested too deep, not JSON, not UTF-8, another root type, a
// field missing or of another type) with a short reason that never quotes the
// payload. Unknown extra fields are ignored so that a newer library can add
// some. It never throws for any input except std::bad_alloc.
//
// Pure functions and a value type; thread-safe.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace compactiond {

struct TopicEvent {
  std::string schema;
  std::string topic;
  std::string event;
};

// PostgreSQL refuses NOTIFY payloads of 8000 bytes or more; refusing them
// here too keeps the parser's work bounded whatever the server does.
inline constexpr std::size_t kMaxTopicEventBytes = 8000;
// A valid payload has depth 1; a little slack for future fields.
inline constexpr int kMaxTopicEventDepth = 8;
// Schema names are at most 63 bytes, topic names 100; events are short.
inline constexpr std::size_t kMaxTopicEventFieldBytes = 256;

// The event in `payload`, or nullopt with a reason in `*why` (when `why` is
// not null).
std::optional<TopicEvent> ParseTopicEvent(std::string_view payload,
                                          std::string* why);

// Rate limit for warnings about bad input: at most one per `period`.
// Allow() says whether to log now and, if so, how many earlier calls it
// suppressed since the last allowed one.
// Thread safety: none; one owner (the listener thread).
class WarningThrottle {
 public:
  using Clock = std::chrono::steady_clock;

  explicit WarningThrottle(Clock::duration period) : period_(period) {}

  bool Allow(Clock::time_point now, std::uint64_t* suppressed);

 private:
  Clock::duration period_;
  std::optional<Clock::time_point> last_;
  std::uint64_t suppressed_ = 0;
};

}  // namespace compactiond
