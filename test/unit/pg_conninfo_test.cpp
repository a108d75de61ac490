// lib/src/pg/conninfo.cpp: what every library connection is given and the
// per-transaction settings SQL, as pure functions (no database, and the
// process environment passed in).
#include <catch2/catch.hpp>

#include "compaction/errors.hpp"
#include "pg/conninfo.hpp"
#include "pg/errors.hpp"
#include "pg/sqlstate.hpp"

using namespace compaction;

namespace {

// The pins every connection's startup options end with.
const std::string kPins =
    "-c search_path=pg_catalog,pg_temp "
    "-c default_transaction_isolation=read\\ committed";

}  // namespace

TEST_CASE("ForConnection pins search_path and isolation after the caller's") {
  const pg::ConnParams all =
      pg::ForConnection({{"options", "-c search_path=public"}}, {}, {});
  CHECK(all.at("options") == "-c search_path=public " + kPins);
  CHECK(all.at("client_encoding") == "UTF8");
  CHECK(all.at("connect_timeout") == "10");
  CHECK(all.at("keepalives_idle") == "10");
  CHECK(all.at("tcp_user_timeout") == "30000");
}

TEST_CASE("ForConnection falls back to PGOPTIONS only without options") {
  pg::Environment env;
  env.pgoptions = "-c work_mem=1MB";
  CHECK(pg::ForConnection({}, {}, env).at("options") ==
        "-c work_mem=1MB " + kPins);
  CHECK(pg::ForConnection({{"options", "-c a.b=1"}}, {}, env).at("options") ==
        "-c a.b=1 " + kPins);
  CHECK(pg::ForConnection({}, {}, {}).at("options") == kPins);
}

TEST_CASE("ForConnection keeps the caller's timeouts and PGCONNECT_TIMEOUT") {
  CHECK(pg::ForConnection({{"connect_timeout", "3"}}, {}, {})
            .at("connect_timeout") == "3");
  pg::Environment env;
  env.connect_timeout = true;
  CHECK(pg::ForConnection({}, {}, env).count("connect_timeout") == 0);
  CHECK(pg::ForConnection({{"client_encoding", "LATIN1"}}, {}, {})
            .at("client_encoding") == "UTF8");
}

TEST_CASE("OptionSettings reads -c and --name settings, server-escaped") {
  const auto settings = pg::OptionSettings(
      "-c statement_timeout=5s -cwork_mem=1MB --lock-timeout=2s "
      "-c application_name=a\\ b",
      "Op");
  REQUIRE(settings.size() == 4);
  CHECK(settings[0] ==
        std::pair<std::string, std::string>("statement_timeout", "5s"));
  CHECK(settings[1].first == "work_mem");
  CHECK(settings[2] ==
        std::pair<std::string, std::string>("lock_timeout", "2s"));
  CHECK(settings[3].second == "a b");
  CHECK_THROWS_AS(pg::OptionSettings("-d 5", "Op"), InvalidArgument);
  CHECK_THROWS_AS(pg::OptionSettings("-c novalue", "Op"), InvalidArgument);
  CHECK_THROWS_AS(pg::OptionSettings("-c bad;name=1", "Op"), InvalidArgument);
}

TEST_CASE("LocalSettingsSql sets the pins and settings for the transaction") {
  const std::string sql = pg::LocalSettingsSql(
      {{"options", "-c statement_timeout=4321 -c x.y=it's\\\\"}}, {}, "Op", {});
  CHECK(sql ==
        "SELECT pg_catalog.set_config('statement_timeout', '4321', true), "
        "pg_catalog.set_config('x.y', E'it''s\\\\', true), "
        "pg_catalog.set_config('search_path', 'pg_catalog,pg_temp', true), "
        "pg_catalog.set_config('default_transaction_isolation', "
        "'read committed', true), "
        "pg_catalog.set_config('client_encoding', 'UTF8', true)");
}

TEST_CASE(
    "ForConnection sends session settings after the caller's options, "
    "escaped") {
  pg::Environment env;
  env.pgoptions = "-c statement_timeout=1";
  const pg::ConnParams all = pg::ForConnection(
      {}, {{"statement_timeout", "5s"}, {"x.y", "a b\\c\t-c d=e"}}, env);
  CHECK(all.at("options") ==
        "-c statement_timeout=1 -c statement_timeout=5s "
        "-c x.y=a\\ b\\\\c\\\t-c\\ d=e " +
            kPins);
  // The server's split gives the values back, one setting each: the last
  // statement_timeout (the map's) wins.
  const auto read = pg::OptionSettings(all.at("options"), "Op");
  REQUIRE(read.size() == 5);
  CHECK(read[1] ==
        std::pair<std::string, std::string>("statement_timeout", "5s"));
  CHECK(read[2] ==
        std::pair<std::string, std::string>("x.y", "a b\\c\t-c d=e"));
}

TEST_CASE("LocalSettingsSql: session settings win over the caller's options") {
  const std::string sql = pg::LocalSettingsSql(
      {{"options", "-c statement_timeout=1 -c Work_Mem=1MB"}},
      {{"STATEMENT_TIMEOUT", "5s"}, {"x.y", "it's"}}, "Op", {});
  CHECK(sql ==
        "SELECT pg_catalog.set_config('Work_Mem', '1MB', true), "
        "pg_catalog.set_config('STATEMENT_TIMEOUT', '5s', true), "
        "pg_catalog.set_config('x.y', 'it''s', true), "
        "pg_catalog.set_config('search_path', 'pg_catalog,pg_temp', true), "
        "pg_catalog.set_config('default_transaction_isolation', "
        "'read committed', true), "
        "pg_catalog.set_config('client_encoding', 'UTF8', true)");
  // Without settings of its own, the caller's search_path gives way to the
  // pin the same way.
  CHECK(
      pg::LocalSettingsSql({{"options", "-c search_path=public"}}, {}, "Op", {})
          .find("'public'") == std::string::npos);
}

TEST_CASE("ParseConninfo (pg) names the operation and never the text") {
  try {
    pg::ParseConninfo("password=hunter2 =", "Connect");
    FAIL("no exception");
  } catch (const InvalidArgument& e) {
    CHECK(e.operation() == "Connect");
    CHECK(std::string(e.what()).find("hunter2") == std::string::npos);
  }
}

TEST_CASE("IsConnectionGone: class 08 and the server ending the backend") {
  CHECK(pg::IsConnectionGone("08006"));
  CHECK(pg::IsConnectionGone("08P01"));
  CHECK(pg::IsConnectionGone(pg::kAdminShutdown));
  CHECK(pg::IsConnectionGone(pg::kCrashShutdown));
  CHECK(pg::IsConnectionGone(pg::kCannotConnectNow));
  CHECK_FALSE(pg::IsConnectionGone(pg::kQueryCanceled));
  CHECK_FALSE(pg::IsConnectionGone(""));
}

TEST_CASE("QuoteIdentifier doubles quotes as PQescapeIdentifier does") {
  CHECK(pg::QuoteIdentifier("compaction") == "\"compaction\"");
  CHECK(pg::QuoteIdentifier("my \"s\"") == "\"my \"\"s\"\"\"");
}
