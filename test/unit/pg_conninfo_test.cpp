// lib/src/pg/conninfo.cpp: what every library connection is given and the
// per-transaction settings SQL, as pure functions (no database, and the
// process environment passed in).
#include <catch2/catch.hpp>

#include "compaction/errors.hpp"
#include "pg/conninfo.hpp"
#include "pg/sqlstate.hpp"

using namespace compaction;

TEST_CASE("ForConnection pins search_path and isolation after the caller's") {
  const pg::ConnParams all =
      pg::ForConnection({{"options", "-c search_path=public"}}, {});
  CHECK(all.at("options") ==
        std::string("-c search_path=public ") + pg::kPinnedOptions);
  CHECK(all.at("client_encoding") == "UTF8");
  CHECK(all.at("connect_timeout") == "10");
  CHECK(all.at("keepalives_idle") == "10");
  CHECK(all.at("tcp_user_timeout") == "30000");
}

TEST_CASE("ForConnection falls back to PGOPTIONS only without options") {
  pg::Environment env;
  env.pgoptions = "-c work_mem=1MB";
  CHECK(pg::ForConnection({}, env).at("options") ==
        std::string("-c work_mem=1MB ") + pg::kPinnedOptions);
  CHECK(pg::ForConnection({{"options", "-c a.b=1"}}, env).at("options") ==
        std::string("-c a.b=1 ") + pg::kPinnedOptions);
}

TEST_CASE("ForConnection keeps the caller's timeouts and PGCONNECT_TIMEOUT") {
  CHECK(
      pg::ForConnection({{"connect_timeout", "3"}}, {}).at("connect_timeout") ==
      "3");
  pg::Environment env;
  env.connect_timeout = true;
  CHECK(pg::ForConnection({}, env).count("connect_timeout") == 0);
  CHECK(pg::ForConnection({{"client_encoding", "LATIN1"}}, {})
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
      {{"options", "-c statement_timeout=4321 -c x.y=it's\\\\"}}, "Op", {});
  CHECK(sql ==
        "SELECT pg_catalog.set_config('statement_timeout', '4321', true), "
        "pg_catalog.set_config('x.y', E'it''s\\\\', true), "
        "pg_catalog.set_config('search_path', 'pg_catalog,pg_temp', true), "
        "pg_catalog.set_config('default_transaction_isolation', "
        "'read committed', true), "
        "pg_catalog.set_config('client_encoding', 'UTF8', true)");
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
