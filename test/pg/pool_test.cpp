// The connection pool (lib/src/pg/pool.cpp): which idle connection a thread
// is handed. Backend PIDs tell the connections apart.
#include "pg/pool.hpp"

#include <libpq-fe.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <future>
#include <optional>
#include <thread>

#include "live_db.hpp"

using namespace compaction;

namespace {

pg::Pool MakePool(int size) {
  return pg::Pool(pg::ParseConninfo("", "pool_test"), {}, "pool_test", size,
                  std::chrono::seconds(10), true);
}

int Pid(const pg::Pool::Lease& lease) { return PQbackendPID((*lease).get()); }

// Acquires on a thread of its own, so the lease counts as that thread's; the
// lease itself comes back to the caller, who releases it whenever it wants.
std::optional<pg::Pool::Lease> AcquireOnOtherThread(pg::Pool& pool) {
  std::optional<pg::Pool::Lease> lease;
  std::thread([&] { lease.emplace(pool.Acquire("pool_test")); }).join();
  return lease;
}

// The same, on a thread that stays alive until this object goes: a thread
// started later cannot be given its id (ids of finished threads are reused).
class ParkedThread {
 public:
  explicit ParkedThread(pg::Pool& pool)
      : thread_([this, &pool] {
          lease.emplace(pool.Acquire("pool_test"));
          acquired_.set_value();
          release_.get_future().wait();
        }) {
    acquired_.get_future().wait();
  }
  ~ParkedThread() {
    release_.set_value();
    thread_.join();
  }
  std::optional<pg::Pool::Lease> lease;

 private:
  std::promise<void> acquired_;
  std::promise<void> release_;
  std::thread thread_;  // last: started once the promises exist
};

}  // namespace

TEST_CASE("a thread gets back its own connection, not the one released last") {
  pg::Pool pool = MakePool(2);
  std::optional<pg::Pool::Lease> mine(pool.Acquire("pool_test"));
  const int my_pid = Pid(*mine);
  std::optional<pg::Pool::Lease> other = AcquireOnOtherThread(pool);
  REQUIRE(Pid(*other) != my_pid);
  mine.reset();
  other.reset();  // released last: a stack would hand this one out next
  pg::Pool::Lease again = pool.Acquire("pool_test");
  CHECK(Pid(again) == my_pid);
}

TEST_CASE("a new thread opens a connection while there is room") {
  pg::Pool pool = MakePool(2);
  int idle_pid = 0;
  {
    pg::Pool::Lease lease = pool.Acquire("pool_test");
    idle_pid = Pid(lease);
  }
  // Taking the idle one would send its thread to a connection of its own
  // next time, and so on down the line.
  std::optional<pg::Pool::Lease> other = AcquireOnOtherThread(pool);
  CHECK(Pid(*other) != idle_pid);
}

TEST_CASE("with every connection open a thread takes the one idle longest") {
  pg::Pool pool = MakePool(2);
  std::optional<pg::Pool::Lease> first(pool.Acquire("pool_test"));
  const int first_pid = Pid(*first);
  ParkedThread second(pool);
  first.reset();
  second.lease.reset();  // released last
  std::optional<pg::Pool::Lease> third = AcquireOnOtherThread(pool);
  CHECK(Pid(*third) == first_pid);
}

TEST_CASE("a connection handed back as no thread's goes to the first one") {
  // What Client::Connect does with its probe connection.
  pg::Pool pool = MakePool(2);
  int probe_pid = 0;
  {
    pg::Pool::Lease probe = pool.Acquire("pool_test");
    probe_pid = Pid(probe);
    (*probe).set_last_user(std::thread::id());
  }
  std::optional<pg::Pool::Lease> other = AcquireOnOtherThread(pool);
  CHECK(Pid(*other) == probe_pid);
}

// The check runs only on connections idle for kCheckAliveAfterIdle or more
// (a thread's back-to-back transactions skip it); the wait below makes this
// one such a connection whatever the machine's speed.
TEST_CASE("a connection the server ended while it idled is replaced") {
  pg::Pool pool = MakePool(1);
  int ended_pid = 0;
  {
    pg::Pool::Lease lease = pool.Acquire("pool_test");
    ended_pid = Pid(lease);
  }
  // Waits (up to 10 s) until the backend has exited.
  testing::RawConn admin;
  REQUIRE(admin.Value("SELECT pg_terminate_backend($1, 10000)",
                      {std::to_string(ended_pid)}) == "t");
  std::this_thread::sleep_for(2 * pg::kCheckAliveAfterIdle);
  pg::Pool::Lease fresh = pool.Acquire("pool_test");
  CHECK(Pid(fresh) != ended_pid);
  pg::Result works(PQexec((*fresh).get(), "SELECT 1"));
  CHECK(PQresultStatus(works.get()) == PGRES_TUPLES_OK);
}
