// libFuzzer target: ParseTopicEvent over arbitrary NOTIFY payloads.
// Crashes on: any exception (it must refuse, not throw), a sanitizer report,
// an accepted payload outside the documented bounds, or one whose fields do
// not survive a round trip through JSON.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "compaction/topic_events.hpp"

namespace {

void Require(bool condition) {
  if (!condition) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view payload(reinterpret_cast<const char*>(data), size);
  std::string why;
  auto event = compaction::ParseTopicEvent(payload, &why);
  if (!event) {
    Require(!why.empty());
    return 0;
  }
  Require(size < compaction::kMaxTopicEventBytes);
  for (const std::string* field :
       {&event->schema, &event->topic, &event->event}) {
    Require(field->size() <= compaction::kMaxTopicEventFieldBytes);
  }
  // What the library would send for the same event parses to the same event.
  std::string again = nlohmann::json{
      {"schema", event->schema},
      {"topic", event->topic},
      {"event",
       event->event}}.dump();
  auto reparsed = compaction::ParseTopicEvent(again, nullptr);
  Require(reparsed && reparsed->schema == event->schema &&
          reparsed->topic == event->topic && reparsed->event == event->event);
  return 0;
}
