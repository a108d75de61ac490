#include "pg/sqlstate.hpp"

#include <catch2/catch.hpp>

#include "compaction/errors.hpp"

using namespace compaction;

namespace {
template <class E>
void ExpectMapped(std::string_view state, bool broken = false) {
  INFO("SQLSTATE " << state);
  try {
    pg::ThrowForSqlState("Op", state, "server said no", broken);
    FAIL("no exception");
  } catch (const E& e) {
    CHECK(e.operation() == "Op");
    CHECK(std::string(e.what()).find("server said no") != std::string::npos);
  } catch (const std::exception& e) {
    FAIL("wrong exception type: " << e.what());
  }
}
}  // namespace

TEST_CASE("SQLSTATEs map onto the error hierarchy") {
  ExpectMapped<LockTimeout>("55P03");
  ExpectMapped<RetryableError>("40001");
  ExpectMapped<RetryableError>("40P01");
  ExpectMapped<ConnectionLost>("08006");
  ExpectMapped<ConnectionLost>("08001");
  ExpectMapped<ConnectionLost>("57P01");
  ExpectMapped<ConnectionLost>("23505", /*broken=*/true);
  ExpectMapped<DatabaseError>("23505");
  ExpectMapped<DatabaseError>("42P01");
  ExpectMapped<StatementCancelled>("57014");
  ExpectMapped<DatabaseError>("");
}

TEST_CASE(
    "a database error keeps its SQLSTATE and derived classes stay "
    "DatabaseErrors") {
  try {
    pg::ThrowForSqlState("Op", "55P03",
                         "canceling statement due to lock timeout", false);
  } catch (const DatabaseError& e) {
    CHECK(e.sqlstate() == "55P03");
    CHECK(dynamic_cast<const LockTimeout*>(&e) != nullptr);
    CHECK(std::string(e.what()) ==
          "Op: lock timeout: canceling statement due to lock timeout (SQLSTATE "
          "55P03)");
  }
}

TEST_CASE(
    "a cancelled statement is its own class, still a DatabaseError with its "
    "SQLSTATE") {
  try {
    pg::ThrowForSqlState("Op", "57014",
                         "canceling statement due to user request", false);
    FAIL("no exception");
  } catch (const DatabaseError& e) {
    CHECK(e.sqlstate() == "57014");
    CHECK(dynamic_cast<const StatementCancelled*>(&e) != nullptr);
  }
}

TEST_CASE("an uninstalled schema is a SchemaVersionMismatch that says so") {
  const SchemaVersionMismatch missing("Op", "schema x", 0, 1);
  CHECK(missing.not_installed());
  CHECK_THAT(missing.what(), Catch::Contains("not installed") &&
                                 !Catch::Contains("compactiond"));
  CHECK_FALSE(SchemaVersionMismatch("Op", "schema x", 2, 1).not_installed());
  CHECK_FALSE(
      SchemaVersionMismatch("Op", "schema x", 1, "abc", "def").not_installed());
}

TEST_CASE(
    "a prepared statement missing or duplicated names the pooler option") {
  for (std::string_view state : {"26000", "42P05"}) {
    INFO(state);
    try {
      pg::ThrowForSqlState("Op", state,
                           "prepared statement \"x\" does not exist", false);
      FAIL("no exception");
    } catch (const DatabaseError& e) {
      CHECK(e.sqlstate() == state);
      CHECK_THAT(e.what(), Catch::Contains("prepared_statements = false"));
    }
  }
}
