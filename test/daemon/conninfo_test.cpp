// Unit tests of the conninfo secrets in the configuration: refused on the
// command line, masked in --print-config, never quoted in an error.
#include "daemon/conninfo.hpp"

#include <catch2/catch.hpp>
#include <string>

#include "daemon/config.hpp"
#include "test/daemon/test_support.hpp"

namespace compactiond {
namespace {

using test::ErrorOf;
using test::ScopedEnv;
using test::WriteFile;

TEST_CASE("a password on the command line is refused, elsewhere masked") {
  CHECK_THROWS_AS(ParseInvocation({"--db", "host=h password=pw"}), ConfigError);
  CHECK_THROWS_AS(ParseInvocation({"--db", "postgres://u:pw@h/db"}),
                  ConfigError);
  CHECK_NOTHROW(ParseInvocation({"--db", "postgres://u@h/db"}));
  CHECK(ConninfoHasSecret("postgresql://u:pw@h:5432/db"));
  CHECK_FALSE(ConninfoHasSecret("host=h user=u"));
  std::string masked = MaskConninfo("host=h password=topsecret");
  CHECK(masked.find("topsecret") == std::string::npos);
  CHECK(masked.find("********") != std::string::npos);

  ScopedEnv env("COMPACTIOND_DB", "host=h password=fromenv");
  Invocation inv = ParseInvocation({"--print-config"});
  std::string rendered = RenderConfig(inv);
  CHECK(rendered.find("fromenv") == std::string::npos);
}

TEST_CASE("sslpassword is a secret like password") {
  // Refused on the command line, in keyword form and in a URI.
  for (const char* db :
       {"host=h sslkey=/k sslpassword=hunter2", "sslpassword='hunter2'",
        "postgresql://u@h/db?sslpassword=hunter2",
        "postgres://h/db?sslmode=verify-full&sslpassword=hunter2"}) {
    INFO(db);
    std::string error = ErrorOf({"--db", db, "--print-config"});
    CHECK_THAT(error,
               Catch::Contains("'db'") && Catch::Contains("sslpassword"));
    CHECK(error.find("hunter2") == std::string::npos);
  }
  CHECK(ConninfoHasSecret("postgresql://u@h/db?sslpassword=x"));
  CHECK_FALSE(ConninfoHasSecret("host=h sslkey=/k sslpassword="));
  CHECK(IsSecretKeyword("sslpassword"));
  CHECK_FALSE(IsSecretKeyword("sslkey"));

  // Masked in --print-config from the environment and from a file.
  std::string masked = MaskConninfo(
      "postgresql://u:pw1@h/db?sslpassword=hunter2&sslmode=verify-full");
  CHECK(masked.find("hunter2") == std::string::npos);
  CHECK(masked.find("pw1") == std::string::npos);
  CHECK_THAT(masked, Catch::Contains("sslpassword='********'") &&
                         Catch::Contains("password='********'") &&
                         Catch::Contains("sslmode='verify-full'"));
  {
    ScopedEnv env("COMPACTIOND_DB", "host=h sslpassword=hunter2");
    std::string rendered = RenderConfig(ParseInvocation({"--print-config"}));
    CHECK(rendered.find("hunter2") == std::string::npos);
    CHECK_THAT(rendered, Catch::Contains("sslpassword='********'"));
  }
  std::string file = WriteFile("db = host=h sslpassword=hunter2\n");
  std::string rendered =
      RenderConfig(ParseInvocation({"--config", file, "--print-config"}));
  std::remove(file.c_str());
  CHECK(rendered.find("hunter2") == std::string::npos);
}

TEST_CASE("an invalid db value is never quoted") {
  // An unescaped '%' in user:password@ makes libpq quote the password.
  for (const char* db : {"postgresql://u:hunter2%zz@h/db", "host='hunter2",
                         "sslpassword=hunter2 nonsense"}) {
    INFO(db);
    ScopedEnv env("COMPACTIOND_DB", db);
    std::string error = ErrorOf({});
    CHECK_THAT(error, Catch::Contains("'db'"));
    CHECK(error.find("hunter2") == std::string::npos);
  }
}

// stats-timeout reaches the library as a session setting, not rendered into
// the conninfo's options (which stay the user's, PGOPTIONS left to the
// library).
TEST_CASE("stats-timeout is a session setting, the options stay the user's") {
  test::ScopedEnv env("PGOPTIONS", "-c work_mem=3MB");
  Invocation inv = ParseInvocation(
      {"--db", "host=h options='-c lock_timeout=1s'", "--stats-timeout", "3s",
       "--prepared-statements", "false"});
  CHECK(ClientOptionsFor(inv.settings).session_settings ==
        std::map<std::string, std::string>{{"statement_timeout", "3000"}});
  CHECK(ClientOptionsFor(inv.settings).prepared_statements == false);
  const auto params = ConnectionParams(inv.settings);
  CHECK(params.at("options") == "-c lock_timeout=1s");
  inv = ParseInvocation({"--db", "host=h"});
  CHECK(ConnectionParams(inv.settings).count("options") == 0);
}

}  // namespace
}  // namespace compactiond
