// Payload JSON that does not round-trip: refused at produce time before
// anything is sent (NaN, infinities, NUL, nesting), and stored numbers that
// nlohmann_json cannot hold read as what they are or fail typed, without
// payload text in the error.
#include <catch2/catch.hpp>
#include <cmath>
#include <functional>
#include <limits>

#include "consumer_support.hpp"
#include "live_db.hpp"

using compaction::InvalidArgument;
using compaction::MessageDecodeError;
using compaction::RawMessage;
using compaction::Tx;
using testing::Compacted;
using testing::Counter;
using testing::LiveDb;

namespace {

struct Real {
  static constexpr int kSchemaVersion = 1;
  double value = 0;
};
void to_json(nlohmann::json& j, const Real& r) { j = {{"value", r.value}}; }
void from_json(const nlohmann::json& j, Real& r) {
  j.at("value").get_to(r.value);
}

struct Unsigned {
  static constexpr int kSchemaVersion = 1;
  std::uint64_t value = 0;
};
void to_json(nlohmann::json& j, const Unsigned& u) { j = {{"value", u.value}}; }
void from_json(const nlohmann::json& j, Unsigned& u) {
  j.at("value").get_to(u.value);
}

nlohmann::json Nested(int depth) {
  nlohmann::json j = 1;
  for (int i = 0; i < depth; ++i) j = nlohmann::json::array({std::move(j)});
  return j;
}

struct BadPayload {
  const char* what;
  std::function<nlohmann::json()> make;  // built per use: deep copies recurse
  const char* says;
};

std::vector<BadPayload> BadPayloads() {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  using J = nlohmann::json;
  return {
      {"NaN",
       [=] {
         return J{{"x", nan}};
       },
       "NaN or infinite number at /x"},
      {"+inf",
       [=] {
         return J{{"a", {1, inf}}};
       },
       "NaN or infinite number at /a/1"},
      {"-inf top level", [=] { return J(-inf); },
       "NaN or infinite number at the top level"},
      {"NUL in a string",
       [] {
         return J{{"s", std::string("a\0b", 3)}};
       },
       "NUL character"},
      {"NUL in a member name",
       [] {
         return J{{std::string("k\0", 2), 1}};
       },
       "member name with a NUL character at /*"},
      {"20,000 deep", [] { return Nested(20000); }, "nested deeper than 512"},
      {"513 deep", [] { return Nested(513); }, "nested deeper than 512"},
  };
}

}  // namespace

TEST_CASE("payloads jsonb would refuse or change are refused before sending") {
  LiveDb db;
  auto topic = db.client().Topic<RawMessage>("bad-json");
  topic.Register();
  auto producer = topic.RegisterProducer();
  for (const auto& bad : BadPayloads()) {
    INFO(bad.what);
    CHECK_THROWS_WITH(producer.Produce(RawMessage{1, bad.make()}),
                      Catch::Contains(bad.says));
    CHECK_THROWS_AS(producer.Produce(RawMessage{1, bad.make()}, Compacted("k")),
                    InvalidArgument);
    // The caller's transaction stays usable: nothing reached the server.
    db.client().InTransaction([&](Tx& tx) {
      CHECK_THROWS_AS(
          producer.ProduceInTx(tx, RawMessage{1, bad.make()}, Compacted("k")),
          InvalidArgument);
      producer.ProduceInTx(tx, RawMessage{1, {{"ok", bad.what}}},
                           Compacted("k"));
    });
    CHECK(topic.Key("k").CompactionHead()->message.payload ==
          nlohmann::json{{"ok", bad.what}});
  }
  CHECK(db.raw().Int("SELECT count(*) FROM " + db.MessageTable("bad-json")) ==
        static_cast<std::int64_t>(BadPayloads().size()));
  // The bound itself is accepted, and reads back.
  producer.Produce(RawMessage{1, Nested(512)}, Compacted("deep"));
  CHECK(topic.Key("deep").CompactionHead()->message.payload == Nested(512));
}

TEST_CASE("a typed message with a NaN or infinite field is refused") {
  LiveDb db;
  auto topic = db.client().Topic<Real>("typed-nan");
  topic.Register();
  auto producer = topic.RegisterProducer();
  for (double v : {std::numeric_limits<double>::quiet_NaN(),
                   std::numeric_limits<double>::infinity(),
                   -std::numeric_limits<double>::infinity()}) {
    CHECK_THROWS_WITH(producer.Produce(Real{v}, Compacted("k")),
                      Catch::Contains("NaN or infinite number at /value"));
    db.client().InTransaction([&](Tx& tx) {
      CHECK_THROWS_AS(producer.ProduceInTx(tx, Real{v}, Compacted("k")),
                      InvalidArgument);
      producer.ProduceInTx(tx, Real{2.5}, Compacted("k"));
    });
  }
  CHECK(topic.Key("k").CompactionHead()->message.value == 2.5);
}

namespace {

// Stores `payload` (jsonb text) as the head of `key`, behind the library's
// back as the owner could (message and head rows in SQL).
std::int64_t Plant(LiveDb& db, const std::string& key,
                   const std::string& payload) {
  return db.raw().Int(
      "WITH m AS (INSERT INTO " + db.MessageTable("wide") +
          " (message_key, schema_version, compaction_rank, payload) "
          "VALUES ($1, 1, 0, $2::jsonb) RETURNING id, created_at) "
          "INSERT INTO " +
          db.HeadTable("wide") +
          " (message_key, head_id, schema_version, compaction_rank, "
          "created_at, "
          "updated_at, idle_since) "
          "SELECT $1, id, 1, 0, created_at, created_at, NULL FROM m "
          "RETURNING head_id",
      {key, payload});
}

// The error names the message and none of the stored digits.
void CheckNoPayload(const MessageDecodeError& e, std::int64_t id) {
  CHECK(e.message_id() == id);
  CHECK_THAT(e.what(), !Catch::Contains("0000000000") &&
                           !Catch::Contains("1234567890") &&
                           !Catch::Contains("e400"));
}

}  // namespace

TEST_CASE("stored numbers beyond double or int64 read as what they are") {
  LiveDb db;
  db.client().Topic<RawMessage>("wide").Register();
  const std::string huge = "1e400";
  const std::string big = "123456789012345678901234567890";
  const std::string over = "10000000000000000000";  // above INT64_MAX
  const auto huge_id = Plant(db, "b-huge", "{\"value\": " + huge + "}");
  const auto minus_id = Plant(db, "c-minus", "{\"value\": [-" + huge + "]}");
  const auto big_id = Plant(db, "d-big", "{\"value\": " + big + "}");
  const auto over_id = Plant(db, "e-over", "{\"value\": " + over + "}");
  Plant(db, "a-plain", "{\"value\": 7}");
  Plant(db, "f-plain", "{\"value\": 8}");

  SECTION("RawMessage reads every head, listing and history included") {
    auto raw = db.client().Topic<RawMessage>("wide");
    const auto heads = raw.ListCompactionHeads({"", 2});
    REQUIRE(heads.size() == 2);
    const auto rest = raw.ListCompactionHeads({heads.back().message_key, 10});
    REQUIRE(rest.size() == 4);
    const auto huge_head = *raw.Key("b-huge").CompactionHead();
    CHECK(huge_head.message.payload["value"].get<double>() ==
          std::numeric_limits<double>::infinity());
    // The exact digits: jsonb prints 1e400 in plain notation.
    CHECK(huge_head.message.payload_text ==
          "{\"value\": 1" + std::string(400, '0') + "}");
    CHECK(raw.Key("c-minus").CompactionHead()->message.payload["value"][0] ==
          -std::numeric_limits<double>::infinity());
    const auto big_head = *raw.Key("d-big").CompactionHead();
    CHECK(big_head.message.payload["value"].get<double>() ==
          1.2345678901234568e29);
    CHECK(big_head.message.payload_text == "{\"value\": " + big + "}");
    CHECK(raw.Key("e-over").CompactionHead()->message.payload["value"] ==
          10000000000000000000ULL);
    CHECK(raw.Key("b-huge").Messages(10).size() == 1);
  }

  SECTION("a consumer delivers them; a typed one names the message") {
    auto raw = db.client().Topic<RawMessage>("wide").Consumer("raw");
    const auto got = testing::ConsumeAll(db.client(), raw);
    REQUIRE(got.size() == 6);
    REQUIRE(got[0].id == huge_id);
    REQUIRE(got[0].message.has_value());
    CHECK(got[0].message->payload["value"].get<double>() ==
          std::numeric_limits<double>::infinity());
    CHECK(got[0].message->payload_text ==
          "{\"value\": 1" + std::string(400, '0') + "}");
    CHECK(got[2].message->payload_text == "{\"value\": " + big + "}");
    auto typed = db.client().Topic<Counter>("wide").Consumer("typed");
    for (int attempt = 0; attempt < 2; ++attempt) {  // the position stays
      try {
        db.client().InTransaction([&](Tx& tx) { return typed.Poll(tx); });
        FAIL("decoded");
      } catch (const MessageDecodeError& e) {
        CheckNoPayload(e, huge_id);
      }
    }
  }

  SECTION("a typed int64 field is a MessageDecodeError, never INT64_MIN") {
    auto typed = db.client().Topic<Counter>("wide");
    for (const auto& [key, id] :
         std::vector<std::pair<std::string, std::int64_t>>{
             {"b-huge", huge_id},
             {"c-minus", minus_id},
             {"d-big", big_id},
             {"e-over", over_id}}) {
      INFO(key);
      try {
        const auto head = typed.Key(key).CompactionHead();
        FAIL("decoded as " << head->message.value);
      } catch (const MessageDecodeError& e) {
        CheckNoPayload(e, id);
      }
    }
    CHECK_THROWS_AS(typed.ListCompactionHeads(), MessageDecodeError);
    CHECK(typed.Key("a-plain").CompactionHead()->message.value == 7);
  }

  SECTION("a double or uint64 field takes what it can hold") {
    auto real = db.client().Topic<Real>("wide");
    CHECK(real.Key("d-big").CompactionHead()->message.value ==
          1.2345678901234568e29);
    CHECK(real.Key("e-over").CompactionHead()->message.value == 1e19);
    try {
      real.Key("b-huge").CompactionHead();
      FAIL("decoded");
    } catch (const MessageDecodeError& e) {
      CheckNoPayload(e, huge_id);
      CHECK_THAT(e.what(), Catch::Contains("beyond double range at /value"));
    }
    auto unsigned_topic = db.client().Topic<Unsigned>("wide");
    CHECK(unsigned_topic.Key("e-over").CompactionHead()->message.value ==
          10000000000000000000ULL);
    CHECK_THROWS_AS(unsigned_topic.Key("d-big").CompactionHead(),
                    MessageDecodeError);
  }
}
