// A login the server refuses is AuthenticationFailed (not ConnectionLost,
// which callers retry): the password, pg_hba.conf, the role. Needs the
// pg_hba.conf lines deploy/local/pg.sh writes for members of
// compaction_test_password and compaction_test_rejected. Tagged [direct]:
// behind PgBouncer the refusal would be the pooler's.
#include <catch2/catch.hpp>
#include <compaction/compaction.hpp>
#include <compaction/topic_events.hpp>
#include <string>

#include "live_db.hpp"

using namespace compaction;
using namespace testing;

namespace {

constexpr const char* kRightPassword = "right-pw-7f3a";
constexpr const char* kWrongPassword = "wrong-pw-9c1e";

// A login role in `group`, dropped at scope exit.
class TestRole {
 public:
  TestRole(RawConn& raw, const std::string& group) : raw_(raw) {
    if (raw_.Int("SELECT count(*) FROM pg_catalog.pg_hba_file_rules "
                 "WHERE $1 = ANY(user_name)",
                 {"+" + group}) == 0) {
      FAIL("pg_hba.conf has no line for +" + group +
           ": start the cluster with deploy/local/pg.sh");
    }
    raw_.TryExec("CREATE ROLE " + group + " NOLOGIN");  // may exist
    name_ = Unique("auth_");
    raw_.Query("CREATE ROLE " + name_ + " LOGIN PASSWORD '" + kRightPassword +
               "' IN ROLE " + group);
  }
  ~TestRole() { raw_.TryExec("DROP ROLE IF EXISTS " + name_); }
  const std::string& name() const { return name_; }

 private:
  RawConn& raw_;
  std::string name_;
};

// The error Client::Connect throws with `conninfo` (no passfile, so only
// what the conninfo says counts), or a failed test.
AuthenticationFailed RefusedConnect(const std::string& conninfo) {
  try {
    Client::Connect(conninfo + " passfile=/nonexistent",
                    ClientOptionsForTests());
  } catch (const AuthenticationFailed& e) {
    return e;
  }
  FAIL("connected, or another error: " << conninfo);
  throw;  // not reached
}

}  // namespace

TEST_CASE("a wrong password is AuthenticationFailed naming the role",
          "[direct]") {
  RawConn raw;
  TestRole role(raw, "compaction_test_password");
  const std::string user = "user=" + role.name();

  AuthenticationFailed e = RefusedConnect(user + " password=" + kWrongPassword);
  CHECK(e.role() == role.name());
  CHECK(e.sqlstate() == "28P01");
  const std::string message = e.what();
  CHECK_THAT(message, Catch::Contains("role \"" + role.name() + "\"") &&
                          Catch::Contains("refused the password"));
  CHECK(message.find(kWrongPassword) == std::string::npos);
  CHECK(message.find(kRightPassword) == std::string::npos);
  // Existing catch sites: an Error and a DatabaseError, not a ConnectionLost.
  const Error& base = e;
  CHECK(dynamic_cast<const ConnectionLost*>(&base) == nullptr);
  CHECK(dynamic_cast<const DatabaseError*>(&base) != nullptr);

  e = RefusedConnect(user);  // no password at all
  CHECK(e.sqlstate() == "28P01");
  CHECK_THAT(std::string(e.what()), Catch::Contains("none was given"));

  // The right password connects: the refusal was the password's.
  CHECK_NOTHROW(Client::Connect(user + " password=" + kRightPassword,
                                ClientOptionsForTests()));

  // The LISTEN connection (non-blocking connect) says the same.
  TopicEventListener listener({{"user", role.name()},
                               {"password", kWrongPassword},
                               {"passfile", "/nonexistent"}});
  bool refused = false;
  try {
    for (int i = 0; i < 200 && !listener.Connect(std::chrono::milliseconds(50));
         ++i) {
    }
  } catch (const AuthenticationFailed& le) {
    refused = le.role() == role.name() && le.sqlstate() == "28P01";
  }
  CHECK(refused);
}

TEST_CASE("pg_hba.conf refusing the role is AuthenticationFailed", "[direct]") {
  RawConn raw;
  TestRole role(raw, "compaction_test_rejected");
  AuthenticationFailed e =
      RefusedConnect("user=" + role.name() + " password=" + kRightPassword);
  CHECK(e.role() == role.name());
  CHECK(e.sqlstate() == "28000");
  CHECK_THAT(std::string(e.what()), Catch::Contains("pg_hba.conf"));

  const std::string ghost = Unique("no_such_role_");
  e = RefusedConnect("user=" + ghost);
  CHECK(e.role() == ghost);
  CHECK(e.sqlstate() == "28000");
  CHECK_THAT(std::string(e.what()), Catch::Contains("does not exist"));
}

TEST_CASE("an unreachable server stays ConnectionLost", "[direct]") {
  // Port 1 on the loopback: refused at once, nothing to authenticate.
  CHECK_THROWS_AS(Client::Connect("host=127.0.0.1 port=1 connect_timeout=2",
                                  ClientOptionsForTests()),
                  ConnectionLost);
}
