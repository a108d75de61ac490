#pragma once
// Whether the tests run against a Citus coordinator (test/citus/
// with_cluster.sh): a suite skips, with its reason, what checks a
// single-node detail that cannot hold there.
#include <string>

#include "live_db.hpp"

namespace testing {

inline bool IsCitus(RawConn& raw) {
  return raw.Int(
             "SELECT count(*) FROM pg_catalog.pg_extension WHERE extname = "
             "'citus'") == 1;
}

}  // namespace testing
