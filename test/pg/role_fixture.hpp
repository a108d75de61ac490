// A schema with the shipped roles installed and a LOGIN member of each
// (roles_test.cpp, privilege_test.cpp). Roles are cluster-wide: they are
// named after the test's own schema (t_<pid>_<n>_owner, ...) and dropped at
// the end of each test.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "live_db.hpp"

namespace testing {

// The SQLSTATE of the DatabaseError `fn` throws ("" when it throws none).
inline std::string SqlStateOf(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const compaction::DatabaseError& e) {
    return e.sqlstate();
  }
  return "";
}

class RoleFixture {
 public:
  RoleFixture() {
    // A topic registered before the roles exist gets its grants too.
    db.client().Topic<Counter>("early").Register();
    db.client().InstallRoles("");
    for (const char* kind : kKinds) {
      db.raw().Query("CREATE ROLE \"" + Login(kind) + "\" LOGIN IN ROLE \"" +
                     Role(kind) + "\"");
    }
  }
  // The schema only: the test installs the roles (no login roles).
  struct Deferred {};
  explicit RoleFixture(Deferred) {}
  ~RoleFixture() {
    // The roles own the schema's objects: drop those first.
    db.raw().TryExec("DROP SCHEMA IF EXISTS " + db.QuotedSchema() + " CASCADE");
    for (const char* kind : kKinds) {
      const std::string role = Role(kind);
      const std::string login = role + "_login";
      db.raw().TryExec("DROP ROLE IF EXISTS \"" + login + "\"");
      db.raw().TryExec("DROP OWNED BY \"" + role + "\"");
      db.raw().TryExec("DROP ROLE IF EXISTS \"" + role + "\"");
    }
  }
  RoleFixture(const RoleFixture&) = delete;
  RoleFixture& operator=(const RoleFixture&) = delete;

  std::string Role(const std::string& kind) const {
    return db.schema() + "_" + kind;
  }
  std::string Login(const std::string& kind) const {
    return Role(kind) + "_login";
  }
  compaction::Client ClientAs(const std::string& kind) const {
    compaction::ClientOptions options;
    options.schema = db.schema();
    options.pool_size = 2;
    return compaction::Client::Connect("user=" + Login(kind), options);
  }
  RawConn RawAs(const std::string& kind) const {
    return RawConn("user=" + Login(kind));
  }

  LiveDb db;

 private:
  static constexpr const char* kKinds[] = {"owner", "app", "janitor",
                                           "monitor"};
};

}  // namespace testing
