// The pool when the server is short of connection slots: a role with
// CONNECTION LIMIT 2, one slot held outside the pool, four threads sharing
// the one slot left. The server refuses the second connection (53300, "too
// many connections for role"), as it does at max_connections ("too many
// clients"); the pool then waits for its open connection to come back.
#include <libpq-fe.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <thread>
#include <vector>

#include "compaction/errors.hpp"
#include "live_db.hpp"
#include "pg/pool.hpp"

using namespace compaction;
using namespace std::chrono_literals;

TEST_CASE("a pool short of server slots waits for its own connection") {
  testing::RawConn admin;
  const std::string role = testing::Unique("scarce");
  admin.Query("CREATE ROLE " + role + " LOGIN CONNECTION LIMIT 2");
  {
    // The refusal reads as the pool expects it to.
    testing::RawConn first("user=" + role);
    testing::RawConn second("user=" + role);
    PGconn* third = PQconnectdb(("user=" + role).c_str());
    CHECK(std::string(PQerrorMessage(third)).find("too many connections") !=
          std::string::npos);
    PQfinish(third);
  }
  // The server counts a closed connection against the limit until its
  // backend has exited: wait for those two to be gone, then take the held
  // slot, retrying while an exiting backend still counts.
  for (int i = 0; i < 1000 && admin.Int("SELECT count(*) FROM "
                                        "pg_catalog.pg_stat_activity WHERE "
                                        "usename = $1",
                                        {role}) > 0;
       ++i) {
    std::this_thread::sleep_for(10ms);
  }
  PGconn* held = nullptr;
  for (int i = 0; i < 1000; ++i) {
    held = PQconnectdb(("user=" + role).c_str());
    if (PQstatus(held) == CONNECTION_OK) break;
    PQfinish(held);
    held = nullptr;
    std::this_thread::sleep_for(10ms);
  }
  REQUIRE(held != nullptr);
  {
    pg::Pool pool(pg::ParseConninfo("user=" + role, "scarce"), {}, "scarce", 4,
                  std::chrono::seconds(20), true);
    std::atomic<int> lost{0};
    std::atomic<int> other{0};
    std::atomic<int> done{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&] {
        for (int i = 0; i < 25; ++i) {
          try {
            pg::Pool::Lease lease = pool.Acquire("scarce");
            PGresult* r = PQexec((*lease).get(), "SELECT pg_sleep(0.002)");
            if (PQresultStatus(r) != PGRES_TUPLES_OK) ++other;
            PQclear(r);
            ++done;
          } catch (const ConnectionLost&) {
            ++lost;
          } catch (...) {
            ++other;
          }
        }
      });
    }
    for (std::thread& t : threads) t.join();
    INFO("ConnectionLost " << lost << ", other failures " << other);
    CHECK(lost == 0);
    CHECK(other == 0);
    CHECK(done == 100);
  }
  PQfinish(held);
  admin.Query("DROP ROLE " + role);
}
