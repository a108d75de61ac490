// pg::Result over a result built in memory (libpq can make one without a
// server), so the getters and their errors are checked without a database.
#include "pg/result.hpp"

#include <libpq-fe.h>

#include <catch2/catch.hpp>
#include <cstring>

#include "compaction/errors.hpp"

using namespace compaction;

namespace {

// One row: n (text "42"), v (NULL), b ("t"), bad ("4x").
pg::Result MakeRow(const char* operation) {
  PGresult* r = PQmakeEmptyPGresult(nullptr, PGRES_TUPLES_OK);
  PGresAttDesc attrs[4] = {};
  const char* names[4] = {"n", "v", "b", "bad"};
  for (int i = 0; i < 4; ++i) {
    attrs[i].name = const_cast<char*>(names[i]);
    attrs[i].format = 0;
  }
  REQUIRE(PQsetResultAttrs(r, 4, attrs) == 1);
  REQUIRE(PQsetvalue(r, 0, 0, const_cast<char*>("42"), 2) == 1);
  REQUIRE(PQsetvalue(r, 0, 1, nullptr, -1) == 1);
  REQUIRE(PQsetvalue(r, 0, 2, const_cast<char*>("t"), 1) == 1);
  REQUIRE(PQsetvalue(r, 0, 3, const_cast<char*>("4x"), 2) == 1);
  return pg::Result(r, operation);
}

}  // namespace

TEST_CASE("pg::Result reads rows, columns and typed fields") {
  const pg::Result r = MakeRow("Op");
  CHECK(r.rows() == 1);
  CHECK(r.columns() == 4);
  CHECK(r.Text(0, 0) == "42");
  CHECK(r.Int64(0, 0) == 42);
  CHECK(r.OptInt64(0, 0) == 42);
  CHECK(r.IsNull(0, 1));
  CHECK_FALSE(r.OptInt64(0, 1).has_value());
  CHECK(r.Bool(0, 2));
  CHECK_FALSE(r.Bool(0, 0));
  CHECK(pg::Int64(r, 0, 0) == 42);
  CHECK(r.ColumnName(3) == "bad");
}

TEST_CASE("pg::Result names the caller's operation and the column") {
  const pg::Result r = MakeRow("Topic.Read");
  try {
    (void)r.Int64(0, 3);
    FAIL("no exception");
  } catch (const InternalError& e) {
    CHECK(e.operation() == "Topic.Read");
    CHECK(std::string(e.what()).find("column bad") != std::string::npos);
  }
}

TEST_CASE("an empty pg::Result has no rows") {
  const pg::Result r;
  CHECK(r == nullptr);
  CHECK(r.rows() == 0);
  CHECK(r.columns() == 0);
  CHECK(r.AffectedRows() == 0);
  CHECK(r.CommandTag().empty());
}
