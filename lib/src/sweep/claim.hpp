// A sweep's claim on a topic and its bookkeeping, kept in a state table
// with one row per topic (janitor_state for the headless sweep).
//
// The claim keeps two processes from sweeping one topic at the same moment;
// it only saves work: correctness rests on the batches' row locks. Every
// statement here is its own autocommit statement that never waits on a
// locked state row (FOR UPDATE SKIP LOCKED), so a competing claimer never
// waits for our batches and any role that can lock the row cannot hang us.
//
// Thread safety: a Claim is used by the thread running its sweep.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "pg/connection.hpp"

namespace compaction::detail {
class ClientCore;
}

namespace compaction::sweep {

// Where one sweep kind keeps its claim and bookkeeping: a table in the
// library schema keyed by topic_id, with janitor_state's columns
// (claimed_by, claimed_until, last_sweep_started_at, last_sweep_finished_at,
// last_success_at, last_deleted_rows, total_deleted_rows, last_error). Each
// kind needs its own row: a shared row would make one kind's claim
// statement skip (SKIP LOCKED) while the other kind's holds it.
struct Ledger {
  const char* table;
};
inline constexpr Ledger kHeadlessLedger{"janitor_state"};

// host:pid:n, unique per call: the default claimed_by.
std::string DefaultOwner();

class Claim {
 public:
  // Takes the topic's claim for `ttl` and stamps last_sweep_started_at,
  // unless another owner holds a live one: then nullopt, with `holder` set.
  // Throws TopicNotFound (named `topic_name`) when the state row is gone
  // (it goes with the topic).
  static std::optional<Claim> Take(
      detail::ClientCore& core, pg::Session s, const char* operation,
      Ledger ledger, std::int64_t topic_id, const std::string& topic_name,
      std::string owner, std::chrono::milliseconds ttl, std::string& holder);

  // Extends the claim to now + ttl; false when another owner took the topic
  // over after ours lapsed (a batch stalled past the TTL).
  bool Renew(std::chrono::milliseconds ttl);

  // Ends the sweep: records finish time and rows, sets last_success_at when
  // `error` is empty, else last_error, and releases the claim. Touches only
  // our own claim, so a sweep that lost it leaves the new owner's
  // bookkeeping alone.
  void Record(std::int64_t rows, const std::string& error);

 private:
  Claim(detail::ClientCore& core, pg::Session s, const char* operation,
        Ledger ledger, std::int64_t topic_id, std::string owner);
  // An UPDATE of our state row ($1 = topic id, $2 = owner) that never waits.
  std::string Update(const std::string& set,
                     const std::string& condition) const;

  detail::ClientCore* core_;
  pg::Session session_;
  const char* operation_;
  Ledger ledger_;
  std::int64_t topic_id_;
  std::string owner_;
};

}  // namespace compaction::sweep
