// The sweep machinery every sweep kind shares: claim the topic, run bounded
// batches (renewing the claim before each, pacing them, stopping on a stop
// request), then record the outcome. What a batch does is the kind's.
#pragma once

#include <cstdint>
#include <stop_token>
#include <string>

#include "compaction/janitor.hpp"
#include "pg/connection.hpp"
#include "sweep/claim.hpp"

namespace compaction::detail {
class ClientCore;
}

namespace compaction::sweep {

struct Batch {
  std::int64_t rows = 0;  // rows the batch removed
  bool full = false;      // it hit its limit: rows may remain
};

// One kind of sweep (the headless janitor, the log cleaner). An object
// lives for one sweep, so it may keep a position between its batches.
class BatchKind {
 public:
  virtual ~BatchKind() = default;
  // Names the sweep in errors and the pool lease.
  virtual const char* operation() const = 0;
  // Where the kind's claim and bookkeeping live.
  virtual Ledger ledger() const = 0;
  // Runs one batch as its own transaction on `s`, committed before it
  // returns. On a throw the loop rolls the transaction back.
  virtual Batch RunBatch(pg::Session s, std::int64_t topic_id) = 0;
};

// Sweeps `topic_name` with `kind`. `options` and the topic name are already
// valid; an empty options.owner means DefaultOwner(). A stop request through
// `stop` cancels the statement in flight (its batch rolls back) or ends the
// pause, and the sweep returns with `cancelled` set. Throws TopicNotFound,
// or the failing batch's error after recording it.
SweepResult RunSweep(detail::ClientCore& core, BatchKind& kind,
                     const std::string& topic_name, const SweepOptions& options,
                     std::stop_token stop);

}  // namespace compaction::sweep
