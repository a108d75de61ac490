// Bad input gets a typed error before anything is written, and nothing
// already stored changes.
#include <catch2/catch.hpp>

#include "live_db.hpp"

using compaction::CompactionOptions;
using compaction::InvalidArgument;
using compaction::ProduceOptions;
using compaction::RawMessage;
using compaction::TopicConfig;
using compaction::Tx;
using testing::Counter;
using testing::LiveDb;

namespace {

const std::vector<std::pair<std::string, std::string>> kBadKeys = {
    {"empty", ""},
    {"NUL byte", std::string("a\0b", 3)},
    {"invalid UTF-8", "\xc3\x28"},
    {"too long", std::string(1025, 'k')},
};

struct Fixture {
  LiveDb db;
  compaction::TopicHandle<Counter> topic = db.client().Topic<Counter>("bad");
  compaction::Producer<Counter> producer = [this] {
    topic.Register();
    auto p = topic.RegisterProducer();
    p.Produce(Counter{1}, {"existing", CompactionOptions{}});
    return p;
  }();

  std::string Snapshot() {
    return *db.raw().Value(
        "SELECT (SELECT string_agg(message_key || ':' || "
        "coalesce(head_id::text, '-') || ':' || "
        "updated_at::text, ',' ORDER BY message_key) FROM " +
        db.HeadTable("bad") + ") || '|' || (SELECT count(*) FROM " +
        db.MessageTable("bad") + ")");
  }
};

}  // namespace

TEST_CASE(
    "bad message keys are rejected by every key operation before any write") {
  Fixture f;
  const std::string before = f.Snapshot();
  for (const auto& [what, key] : kBadKeys) {
    INFO(what);
    CHECK_THROWS_AS(f.topic.Key(key).CompactionHead(), InvalidArgument);
    CHECK_THROWS_AS(f.topic.Key(key).Messages(10), InvalidArgument);
    CHECK_THROWS_AS(f.producer.Produce(Counter{2}, {key, CompactionOptions{}}),
                    InvalidArgument);
    CHECK_THROWS_AS(f.producer.Produce(Counter{2}, {key, std::nullopt}),
                    InvalidArgument);
    f.db.client().InTransaction([&](Tx& tx) {
      CHECK_THROWS_AS(f.topic.Key(key).LockCompactionHead(tx), InvalidArgument);
      // The caller's transaction is still usable afterwards.
      CHECK(f.topic.Key("existing").LockCompactionHead(tx)->message.value == 1);
    });
  }
  CHECK(f.Snapshot() == before);
}

TEST_CASE("bad topic names and TTLs are rejected before any write") {
  LiveDb db;
  for (const std::string& name :
       {std::string(""), std::string(101, 'a'), std::string("Upper"),
        std::string("with space"), std::string("quote\""),
        std::string("semi;colon"), std::string("x'; DROP TABLE topic; --"),
        std::string("a\"b")}) {
    INFO(name);
    CHECK_THROWS_AS(db.client().Topic<Counter>(name).Register(),
                    InvalidArgument);
    CHECK_THROWS_AS(db.client().Topic<Counter>(name).Key("k").CompactionHead(),
                    InvalidArgument);
  }
  CHECK_THROWS_WITH(db.client().Topic<Counter>("ok").Register(
                        testing::Ttl(std::chrono::milliseconds(0))),
                    Catch::Contains("headless_ttl must be in 1.."));
  CHECK_THROWS_AS(db.client().Topic<Counter>("ok").Register(
                      testing::Ttl(std::chrono::milliseconds(-1))),
                  InvalidArgument);
  // Far beyond any real TTL: today's clock plus it would overflow a
  // timestamp (SQLSTATE 22008 in every sweep), so it is refused up front.
  CHECK_THROWS_WITH(db.client().Topic<Counter>("ok").Register(
                        testing::Ttl(std::chrono::hours(24) * 1000000000)),
                    Catch::Contains("headless_ttl must be in 1..") &&
                        Catch::Contains("36500 days"));
  CHECK_THROWS_AS(db.client().Topic<Counter>("ok").Register(testing::Ttl(
                      compaction::kMaxTtl + std::chrono::milliseconds(1))),
                  InvalidArgument);
  CHECK(db.raw().Int("SELECT count(*) FROM " + db.QuotedSchema() + ".topic") ==
        0);
  CHECK_NOTHROW(db.client().Topic<Counter>("ok-max").Register(
      testing::Ttl(compaction::kMaxTtl)));
}

TEST_CASE(
    "a compacted produce without a key and non-positive limits are rejected") {
  Fixture f;
  const std::string before = f.Snapshot();
  CHECK_THROWS_WITH(
      f.producer.Produce(Counter{2}, {std::nullopt, CompactionOptions{}}),
      Catch::Contains("needs a message key"));
  f.db.client().InTransaction([&](Tx& tx) {
    CHECK_THROWS_AS(f.producer.ProduceInTx(tx, Counter{2},
                                           {std::nullopt, CompactionOptions{}}),
                    InvalidArgument);
  });
  CHECK_THROWS_AS(f.topic.Key("existing").Messages(0), InvalidArgument);
  CHECK_THROWS_AS(f.topic.Key("existing").Messages(-3), InvalidArgument);
  CHECK_THROWS_AS(f.topic.ListCompactionHeads({"", 0}), InvalidArgument);
  CHECK_THROWS_AS(f.topic.ListCompactionHeads({"", -1}), InvalidArgument);
  CHECK(f.Snapshot() == before);
}

TEST_CASE(
    "an unknown topic is TopicNotFound and the caller's transaction stays "
    "usable") {
  Fixture f;
  auto missing = f.db.client().Topic<Counter>("missing");
  CHECK_THROWS_AS(missing.Key("k").CompactionHead(), compaction::TopicNotFound);
  CHECK_THROWS_AS(missing.RegisterProducer(), compaction::TopicNotFound);
  CHECK_THROWS_AS(missing.Stats(), compaction::TopicNotFound);
  f.db.client().InTransaction([&](Tx& tx) {
    CHECK_THROWS_WITH(
        missing.Key("k").LockCompactionHead(tx),
        "LockCompactionHead: topic \"missing\" is not registered");
    f.producer.ProduceInTx(tx, Counter{5}, {"after", CompactionOptions{}});
  });
  CHECK(f.topic.Key("after").CompactionHead()->message.value == 5);
}

TEST_CASE("a stored payload that does not decode names the message id") {
  LiveDb db;
  auto raw = db.client().Topic<RawMessage>("decode");
  raw.Register();
  auto producer = raw.RegisterProducer();
  const auto wrong_shape = producer.Produce(RawMessage{1, {{"value", "text"}}},
                                            {"shape", CompactionOptions{}});
  const auto newer = producer.Produce(RawMessage{3, {{"value", 1}}},
                                      {"version", CompactionOptions{}});
  auto typed = db.client().Topic<Counter>("decode");

  try {
    typed.Key("shape").CompactionHead();
    FAIL("decoded");
  } catch (const compaction::MessageDecodeError& e) {
    CHECK(e.message_id() == wrong_shape.id);
    CHECK_THAT(e.what(),
               Catch::Contains("message " + std::to_string(wrong_shape.id)));
  }
  try {
    db.client().InTransaction(
        [&](Tx& tx) { typed.Key("version").LockCompactionHead(tx); });
    FAIL("decoded");
  } catch (const compaction::MessageSchemaVersionMismatch& e) {
    CHECK(e.message_id() == newer.id);
    CHECK(e.stored_version() == 3);
    CHECK(e.expected_version() == 1);
  }
  // The raw type reads both.
  CHECK(raw.Key("version").CompactionHead()->message.schema_version == 3);
}
