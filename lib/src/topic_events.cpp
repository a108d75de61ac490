#include "compaction/topic_events.hpp"

#include <nlohmann/json.hpp>

namespace compaction {
namespace {

void Refuse(std::string* why, const char* reason) {
  if (why != nullptr) *why = reason;
}

// Maximum nesting of arrays and objects, measured before parsing so that a
// payload of thousands of '[' is refused in one linear pass without building
// a deep tree. Brackets inside strings do not count. Malformed JSON may be
// measured loosely here: the parser refuses it afterwards anyway.
bool NestedTooDeep(std::string_view text, int limit) {
  int depth = 0;
  bool in_string = false;
  bool escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > limit) return true;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return false;
}

// Copies the string field `name` of `object` to `*out`; false with a reason
// when it is missing, not a string or too long.
bool StringField(const nlohmann::json& object, const char* name,
                 std::string* out, std::string* why) {
  auto it = object.find(name);
  if (it == object.end()) {
    if (why != nullptr) *why = std::string("field \"") + name + "\" missing";
    return false;
  }
  const auto* value = it->get_ptr<const nlohmann::json::string_t*>();
  if (value == nullptr) {
    if (why != nullptr) {
      *why = std::string("field \"") + name + "\" is not a string";
    }
    return false;
  }
  if (value->size() > kMaxTopicEventFieldBytes) {
    if (why != nullptr) *why = std::string("field \"") + name + "\" too long";
    return false;
  }
  *out = *value;
  return true;
}

}  // namespace

std::optional<TopicEvent> ParseTopicEvent(std::string_view payload,
                                          std::string* why) {
  if (payload.empty()) {
    Refuse(why, "empty payload");
    return std::nullopt;
  }
  if (payload.size() >= kMaxTopicEventBytes) {
    Refuse(why, "payload too large");
    return std::nullopt;
  }
  if (NestedTooDeep(payload, kMaxTopicEventDepth)) {
    Refuse(why, "payload nested too deeply");
    return std::nullopt;
  }
  // The non-throwing overload: invalid JSON and invalid UTF-8 inside
  // strings both yield a "discarded" value instead of parse_error.
  nlohmann::json json =
      nlohmann::json::parse(payload.begin(), payload.end(), nullptr,
                            /*allow_exceptions=*/false);
  if (json.is_discarded()) {
    Refuse(why, "not valid JSON in UTF-8");
    return std::nullopt;
  }
  if (!json.is_object()) {
    Refuse(why, "payload is not a JSON object");
    return std::nullopt;
  }
  TopicEvent event;
  if (!StringField(json, "schema", &event.schema, why) ||
      !StringField(json, "topic", &event.topic, why) ||
      !StringField(json, "event", &event.event, why)) {
    return std::nullopt;
  }
  return event;
}

}  // namespace compaction
