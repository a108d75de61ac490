#include "validate.hpp"

#include <catch2/catch.hpp>

#include "compaction/errors.hpp"
#include "compaction/options.hpp"

using compaction::InvalidArgument;
using namespace compaction::detail;

TEST_CASE("topic names follow [a-z0-9][a-z0-9._-]*, at most 100 characters") {
  for (const char* ok : {"orders", "a", "0", "orders.v2_eu-west", "x-1.y_2"}) {
    CHECK_NOTHROW(ValidateTopicName("t", ok));
  }
  CHECK_NOTHROW(ValidateTopicName("t", std::string(100, 'a')));
  for (const std::string& bad :
       {std::string(""), std::string(101, 'a'), std::string("Orders"),
        std::string("with space"), std::string("quo\"te"), std::string("it's"),
        std::string("a;drop table topic"), std::string("x'); DROP TABLE t;--"),
        std::string(".hidden"), std::string("-dash"), std::string("a\0b", 3),
        std::string("caf\xc3\xa9")}) {
    CHECK_THROWS_AS(ValidateTopicName("t", bad), InvalidArgument);
  }
}

TEST_CASE("topic name errors say what is wrong") {
  CHECK_THROWS_WITH(ValidateTopicName("Register", ""),
                    Catch::Contains("empty"));
  CHECK_THROWS_WITH(ValidateTopicName("Register", "Upper"),
                    Catch::Contains("must start with a-z or 0-9"));
  CHECK_THROWS_WITH(ValidateTopicName("Register", "a b"),
                    Catch::Contains("may contain only"));
  CHECK_THROWS_WITH(ValidateTopicName("Register", std::string(101, 'a')),
                    Catch::Contains("longer than 100"));
}

TEST_CASE("message keys are 1..1024 bytes of UTF-8 without NUL") {
  CHECK_NOTHROW(ValidateMessageKey("k", "user:42"));
  CHECK_NOTHROW(ValidateMessageKey("k", "Grüße 世界 🎉"));
  CHECK_NOTHROW(ValidateMessageKey("k", std::string(1024, 'k')));
  CHECK_THROWS_WITH(ValidateMessageKey("k", ""), Catch::Contains("empty"));
  CHECK_THROWS_WITH(ValidateMessageKey("k", std::string(1025, 'k')),
                    Catch::Contains("longer than 1024"));
  CHECK_THROWS_WITH(ValidateMessageKey("k", std::string("a\0b", 3)),
                    Catch::Contains("NUL"));
  CHECK_THROWS_WITH(ValidateMessageKey("k", "\xff\xfe"),
                    Catch::Contains("UTF-8"));
}

TEST_CASE("UTF-8 validation rejects malformed sequences") {
  CHECK(IsValidUtf8(""));
  CHECK(IsValidUtf8("\xc3\xa9\xe4\xb8\x96\xf0\x9f\x8e\x89"));
  CHECK_FALSE(IsValidUtf8("\xc3"));              // truncated
  CHECK_FALSE(IsValidUtf8("\xc0\xaf"));          // overlong '/'
  CHECK_FALSE(IsValidUtf8("\xed\xa0\x80"));      // surrogate U+D800
  CHECK_FALSE(IsValidUtf8("\xf4\x90\x80\x80"));  // past U+10FFFF
  CHECK_FALSE(IsValidUtf8("\x80"));              // lone continuation
  CHECK_FALSE(IsValidUtf8("\xe4\xb8"));          // truncated 3-byte
}

TEST_CASE("headless_ttl and limits must be positive") {
  CHECK_NOTHROW(ValidateHeadlessTtl("r", std::chrono::milliseconds(1)));
  CHECK_THROWS_AS(ValidateHeadlessTtl("r", std::chrono::milliseconds(0)),
                  InvalidArgument);
  CHECK_THROWS_AS(ValidateHeadlessTtl("r", std::chrono::milliseconds(-5)),
                  InvalidArgument);
  CHECK_THROWS_AS(ValidateLimit("m", "limit", 0, 10), InvalidArgument);
  CHECK_THROWS_AS(ValidateLimit("m", "limit", -1, 10), InvalidArgument);
  CHECK_THROWS_AS(ValidateLimit("m", "limit", 11, 10), InvalidArgument);
  CHECK_NOTHROW(ValidateLimit("m", "limit", 10, 10));
}

TEST_CASE("CheckClientOptions names a session setting it refuses") {
  using compaction::ClientOptions;
  CHECK_NOTHROW(CheckClientOptions("Connect", ClientOptions{}));
  const auto refused = [](std::string name, std::string value) -> std::string {
    ClientOptions options;
    options.session_settings[name] = value;
    try {
      CheckClientOptions("Connect", options);
    } catch (const InvalidArgument& e) {
      CHECK(e.operation() == "Connect");
      return e.what();
    }
    return {};
  };
  CHECK(refused("statement_timeout", "5s").empty());
  CHECK(refused("my.custom_setting", "a b\\c").empty());
  CHECK(refused("bad name", "1").find("bad name") != std::string::npos);
  CHECK(refused("a=b", "1").find("\"a=b\"") != std::string::npos);
  CHECK(refused("", "1").find("not a setting name") != std::string::npos);
  CHECK(refused("Search_Path", "public").find("Search_Path") !=
        std::string::npos);
  CHECK(refused("client_encoding", "LATIN1").find("client_encoding") !=
        std::string::npos);
  const std::string nul = refused("work_mem", std::string("1MB\0x", 5));
  CHECK(nul.find("work_mem") != std::string::npos);
  CHECK(nul.find("NUL") != std::string::npos);
}

TEST_CASE("CheckClientOptions: pool, timeout and schema") {
  compaction::ClientOptions options;
  options.schema = std::string("a\0b", 3);
  CHECK_THROWS_AS(CheckClientOptions("Connect", options), InvalidArgument);
  options.schema = "\xff";
  CHECK_THROWS_AS(CheckClientOptions("Connect", options), InvalidArgument);
  options.schema = "my \"schema\"";
  CHECK_NOTHROW(CheckClientOptions("Connect", options));
  options.pool_size = 0;
  CHECK_THROWS_AS(CheckClientOptions("Connect", options), InvalidArgument);
}
