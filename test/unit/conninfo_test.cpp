// The library's conninfo helpers (compaction/conninfo.hpp): pure, no
// database.
#include "compaction/conninfo.hpp"

#include <catch2/catch.hpp>

#include "compaction/errors.hpp"

using namespace compaction;

TEST_CASE("ParseConninfo reads keyword/value strings and URIs") {
  CHECK(ParseConninfo("").empty());
  const ConnParams kv = ParseConninfo("host=h port=5433 dbname='my db'");
  CHECK(kv.at("host") == "h");
  CHECK(kv.at("port") == "5433");
  CHECK(kv.at("dbname") == "my db");
  CHECK(kv.count("user") == 0);  // only what it sets
  const ConnParams uri = ParseConninfo("postgresql://u:pw@h:5432/db");
  CHECK(uri.at("user") == "u");
  CHECK(uri.at("password") == "pw");
  CHECK(uri.at("dbname") == "db");
}

TEST_CASE("ParseConninfo refuses garbage without quoting it") {
  try {
    ParseConninfo("host=h password=s3cret nonsense");
    FAIL("no exception");
  } catch (const InvalidArgument& e) {
    CHECK(std::string(e.what()).find("s3cret") == std::string::npos);
  }
  CHECK_THROWS_AS(ParseConninfo("postgresql://u:p%zz@h/db"), InvalidArgument);
}

TEST_CASE("MaskConninfo hides every secret, empty ones included") {
  CHECK(IsSecretConninfoKeyword("password"));
  CHECK(IsSecretConninfoKeyword("sslpassword"));
  CHECK_FALSE(IsSecretConninfoKeyword("sslkey"));
  const std::string masked =
      MaskConninfo("host=h password=topsecret sslpassword=''");
  CHECK(masked.find("topsecret") == std::string::npos);
  CHECK(masked == "host='h' password='********' sslpassword='********'");
  CHECK(MaskConninfo("host=h 'oops") == "<unparsable conninfo>");
  CHECK(MaskConninfo("").empty());
}

TEST_CASE("RenderConninfo quotes what ParseConninfo reads back") {
  const ConnParams params = {{"dbname", "it's \\ here"}, {"host", "h"}};
  CHECK(ParseConninfo(RenderConninfo(params)) == params);
}
