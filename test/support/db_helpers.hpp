// Helpers of the live tests that force orderings inside the database:
// polling for a condition, pausing statements at a trigger, ageing rows.
#pragma once

#include <chrono>
#include <string>
#include <thread>

#include "live_db.hpp"

namespace testing {

// Polls `done` every 5 ms until it holds; false after `timeout`.
template <typename Predicate>
bool WaitUntil(Predicate done, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return false;
}

// Pauses statements inside the database: a BEFORE `event` row trigger on
// `table` (only for rows matching `when`, a trigger WHEN condition) locks a
// gate table that the test holds while closed, so the statement waits on
// 'Lock' (no timed sleep) until Open(). One gate per LiveDb schema.
class TriggerGate {
 public:
  TriggerGate(LiveDb& db, const std::string& table, const std::string& event,
              const std::string& when = "true");
  void Close();
  void Open();

 private:
  std::string gate_;
  RawConn holder_;
};

// Moves a headless row's last lock into the past (both columns: the CHECK
// wants idle_since = updated_at while headless). created_at stays: the
// database refuses to change it.
void Age(RawConn& raw, const std::string& table, const std::string& key,
         const std::string& age = "2 hours");

// Waits (up to 10 s) until a backend of application `app` matches
// `waiting`, a condition on pg_stat_activity's columns written by the test
// (e.g. "wait_event = 'SyncRep'"), then terminates it. True when it did.
bool TerminateWhen(RawConn& raw, const std::string& app,
                   const std::string& waiting);

}  // namespace testing
