#pragma once
// Whether the live tests run against a Citus coordinator (the `citus`
// profile, test/citus/with_cluster.sh), and an explicit skip for the few
// single-node details that cannot hold there. A skip names its reason on
// stderr, so a run on the cluster lists what it did not check.
#include <string>

#include "live_db.hpp"

namespace testing {

// True when the database of the PG* variables has the citus extension:
// LiveDb's InstallSchema then installs the `citus` profile. Read once per
// process (a test binary runs against one cluster).
bool CitusProfile();

// On Citus: prints "SKIP on Citus: <test case>: <reason>" and returns
// true, so the caller returns before checking what only a single node
// promises. Elsewhere false, and the test runs whole.
bool SkipOnCitus(const std::string& reason);

}  // namespace testing
