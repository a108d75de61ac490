// Unit tests of the NOTIFY payload parser: no database. The payloads are
// what any role could send on the topic event channel.
#include "compaction/topic_events.hpp"

#include <catch2/catch.hpp>
#include <optional>
#include <string>

#include "sql_text.hpp"

namespace compaction {
namespace {

// The reason a payload was refused; fails the test when it was accepted.
std::string Refused(const std::string& payload) {
  std::string why;
  std::optional<TopicEvent> event = ParseTopicEvent(payload, &why);
  CHECK_FALSE(event.has_value());
  CHECK_FALSE(why.empty());
  return why;
}

TEST_CASE("ParseTopicEvent accepts what the library sends", "[topic_event]") {
  std::string why;
  auto event = ParseTopicEvent(
      R"({"schema": "compaction", "topic": "orders", "event": "registered"})",
      &why);
  REQUIRE(event.has_value());
  CHECK(event->schema == "compaction");
  CHECK(event->topic == "orders");
  CHECK(event->event == "registered");
}

TEST_CASE("ParseTopicEvent ignores unknown extra fields", "[topic_event]") {
  auto event = ParseTopicEvent(
      R"({"schema":"s","topic":"t","event":"destroyed","extra":[1,{"a":null}]})",
      nullptr);
  REQUIRE(event.has_value());
  CHECK(event->event == "destroyed");
}

TEST_CASE("ParseTopicEvent refuses fields of the wrong type", "[topic_event]") {
  const std::string others = R"("topic":"t","event":"e")";
  for (const char* bad :
       {"1", "1.5", "true", "null", "[]", "[\"s\"]", "{}", R"({"s":"s"})"}) {
    CAPTURE(bad);
    CHECK(Refused(std::string(R"({"schema":)") + bad + "," + others + "}") ==
          "field \"schema\" is not a string");
    CHECK(Refused(std::string(R"({"schema":"s","topic":)") + bad +
                  R"(,"event":"e"})") == "field \"topic\" is not a string");
    CHECK(Refused(std::string(R"({"schema":"s","topic":"t","event":)") + bad +
                  "}") == "field \"event\" is not a string");
  }
}

TEST_CASE("ParseTopicEvent refuses missing fields", "[topic_event]") {
  CHECK(Refused(R"({"topic":"t","event":"e"})") == "field \"schema\" missing");
  CHECK(Refused(R"({"schema":"s","event":"e"})") == "field \"topic\" missing");
  CHECK(Refused(R"({"schema":"s","topic":"t"})") == "field \"event\" missing");
  CHECK(Refused("{}") == "field \"schema\" missing");
}

TEST_CASE("ParseTopicEvent refuses roots other than an object",
          "[topic_event]") {
  for (const char* root : {"null", "[]", "[1]", R"(["schema","s"])",
                           R"([{"schema":"s","topic":"t","event":"e"}])", "1",
                           "\"s\"", "true", " null "}) {
    CAPTURE(root);
    CHECK(Refused(root) == "payload is not a JSON object");
  }
}

TEST_CASE("ParseTopicEvent refuses what is not JSON", "[topic_event]") {
  CHECK(Refused("") == "empty payload");
  for (const char* text :
       {" ", "{", "}", "{\"schema\":", "registered", "{'schema':'s'}",
        "{\"schema\":\"s\"} trailing", "\x01", "{\"schema\":\"s\",}"}) {
    CAPTURE(text);
    CHECK(Refused(text) == "not valid JSON in UTF-8");
  }
}

TEST_CASE("ParseTopicEvent refuses invalid UTF-8", "[topic_event]") {
  // A lone continuation byte, a truncated sequence, an overlong '/', a
  // surrogate encoded directly, and 0xff: in a value, in a key, outside.
  for (const char* bytes :
       {"\x80", "\xc3", "\xc0\xaf", "\xed\xa0\x80", "\xff"}) {
    CAPTURE(bytes);
    std::string b(bytes);
    CHECK(Refused(R"({"schema":")" + b + R"(","topic":"t","event":"e"})") ==
          "not valid JSON in UTF-8");
    CHECK(
        Refused(R"({")" + b + R"(":1,"schema":"s","topic":"t","event":"e"})") ==
        "not valid JSON in UTF-8");
    CHECK(Refused(b) == "not valid JSON in UTF-8");
  }
  // An escaped lone surrogate is invalid too.
  CHECK(Refused(R"({"schema":"\ud800","topic":"t","event":"e"})") ==
        "not valid JSON in UTF-8");
}

TEST_CASE("ParseTopicEvent refuses deep nesting without recursing",
          "[topic_event]") {
  // Refused on size before any scan; under the size cap, on depth.
  CHECK(Refused(std::string(100000, '[')) == "payload too large");
  CHECK(Refused(std::string(kMaxTopicEventBytes - 1, '[')) ==
        "payload nested too deeply");
  CHECK(Refused(std::string(3999, '[') + std::string(3999, ']')) ==
        "payload nested too deeply");
  std::string deep_object;
  for (int i = 0; i < 1500; ++i) deep_object += R"({"a":)";
  CHECK(Refused(deep_object) == "payload nested too deeply");
  // Inside an extra field, at the limit and one past it.
  auto nested = [](int depth) {
    return R"({"schema":"s","topic":"t","event":"e","x":)" +
           std::string(depth - 1, '[') + std::string(depth - 1, ']') + "}";
  };
  CHECK(ParseTopicEvent(nested(kMaxTopicEventDepth), nullptr).has_value());
  CHECK(Refused(nested(kMaxTopicEventDepth + 1)) ==
        "payload nested too deeply");
  // Brackets inside strings are text, not nesting.
  auto event =
      ParseTopicEvent(R"({"schema":"s","topic":"t","event":"e","x":")" +
                          std::string(1000, '[') + R"(\"[[[["})",
                      nullptr);
  CHECK(event.has_value());
}

TEST_CASE("ParseTopicEvent bounds the payload and its fields",
          "[topic_event]") {
  auto with_pad = [](std::size_t total) {
    std::string head = R"({"schema":"s","topic":"t","event":"e","pad":")";
    std::string tail = "\"}";
    return head + std::string(total - head.size() - tail.size(), 'x') + tail;
  };
  CHECK(with_pad(kMaxTopicEventBytes - 1).size() == 7999);
  CHECK(ParseTopicEvent(with_pad(kMaxTopicEventBytes - 1), nullptr));
  CHECK(Refused(with_pad(kMaxTopicEventBytes)) == "payload too large");
  CHECK(Refused(std::string(1 << 20, ' ')) == "payload too large");
  std::string long_topic(kMaxTopicEventFieldBytes + 1, 'a');
  CHECK(Refused(R"({"schema":"s","topic":")" + long_topic +
                R"(","event":"e"})") == "field \"topic\" too long");
}

TEST_CASE("ParseTopicEvent reasons never quote the payload", "[topic_event]") {
  std::string secret = "hunter2-secret";
  for (const std::string& payload :
       {R"({"schema":")" + secret + R"(","topic":1,"event":"e"})", secret,
        "[\"" + secret + "\"]", R"({")" + secret + R"(":"x"})"}) {
    CHECK(Refused(payload).find(secret) == std::string::npos);
  }
}

TEST_CASE("the registration function notifies on the library's channel",
          "[topic_event]") {
  // register_topic() in system_v1.sql sends the NOTIFY of a registration;
  // topics.cpp sends Destroy's with the constant itself.
  CHECK(std::string(sql::k_system_v1)
            .find(std::string("pg_notify('") + kTopicEventChannel + "'") !=
        std::string::npos);
}

}  // namespace
}  // namespace compaction
