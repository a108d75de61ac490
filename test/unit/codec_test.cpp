#include <catch2/catch.hpp>

#include "compaction/compaction.hpp"

namespace {
struct Point {
  static constexpr int kSchemaVersion = 2;
  int x = 0;
  int y = 0;
};
void to_json(nlohmann::json& j, const Point& p) {
  j = {{"x", p.x}, {"y", p.y}};
}
void from_json(const nlohmann::json& j, Point& p) {
  j.at("x").get_to(p.x);
  j.at("y").get_to(p.y);
}

compaction::detail::RawStored Raw(std::int64_t id, int version,
                                  nlohmann::json payload) {
  compaction::detail::RawStored raw;
  raw.id = id;
  raw.schema_version = version;
  raw.message = compaction::RawMessage{version, std::move(payload)};
  return raw;
}
}  // namespace

static_assert(compaction::Message<Point>);
static_assert(compaction::Message<compaction::RawMessage>);
static_assert(!compaction::Message<int>);

TEST_CASE("a typed message decodes from its schema version") {
  auto stored = compaction::detail::DecodeStored<Point>(
      "Read", Raw(7, 2, {{"x", 1}, {"y", 2}}));
  CHECK(stored.message.x == 1);
  CHECK(stored.message.y == 2);
}

TEST_CASE("another schema version is a typed error naming both versions") {
  try {
    compaction::detail::DecodeStored<Point>("CompactionHead",
                                            Raw(42, 1, {{"x", 1}, {"y", 2}}));
    FAIL("decoded");
  } catch (const compaction::MessageSchemaVersionMismatch& e) {
    CHECK(e.message_id() == 42);
    CHECK(e.stored_version() == 1);
    CHECK(e.expected_version() == 2);
    CHECK_THAT(e.what(), Catch::Contains("message 42") &&
                             Catch::Contains("version 1") &&
                             Catch::Contains("version 2"));
  }
}

TEST_CASE("a payload that does not fit the type names the message id") {
  CHECK_THROWS_MATCHES(compaction::detail::DecodeStored<Point>(
                           "Messages", Raw(9, 2, {{"x", "nope"}})),
                       compaction::MessageDecodeError,
                       Catch::Message("Messages: message 9 does not decode: "
                                      "[json.exception.type_error.302] type "
                                      "must be number, but is string"));
}

TEST_CASE("RawMessage keeps any version and payload") {
  auto stored = compaction::detail::DecodeStored<compaction::RawMessage>(
      "Read", Raw(3, 17, {{"anything", true}}));
  CHECK(stored.message.schema_version == 17);
  CHECK(stored.message.payload["anything"] == true);
}

TEST_CASE("a payload that cannot be serialized is an invalid argument") {
  CHECK_THROWS_AS(
      compaction::detail::DumpPayload("Produce", nlohmann::json("\xff")),
      compaction::InvalidArgument);
}
