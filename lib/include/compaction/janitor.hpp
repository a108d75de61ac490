// Janitor: the two maintenance jobs of a topic, each in bounded batches:
// SweepHeadless deletes expired headless rows, CompactLog (the log cleaner)
// removes messages out of retention and expires tombstones.
//
// Each batch is its own short transaction that picks rows through the
// idle_since partial index with FOR UPDATE SKIP LOCKED and re-checks
// `head_id IS NULL AND updated_at < now() - ttl` in the DELETE, so a sweep
// never waits on a locked key and never deletes a materialized head. The
// cutoff comes from the server clock and the topic row.
//
// Before the batches a sweep takes the topic's claim in janitor_state (the
// cleaner: in log_cleaner_state) so that
// two processes do not sweep one topic at the same moment; the second one
// skips and says so. The claim only saves work: correctness rests on the
// row locks alone.
//
// Lifetime: shares the Client's connection pool, so it may outlive the
// Client object it was made from. Thread safety:
// SweepHeadless and CompactLog may be called from several threads but run
// one at a time per Janitor (use one Janitor per thread for parallel sweeps);
// Cancel() may be called from any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>

#include "compaction/export.hpp"

namespace compaction {

class Client;
namespace detail {
class ClientCore;
}

// The longest SweepOptions::batch_pause: pacing beyond it has no use (a
// batch takes milliseconds) and would keep a dead sweep's claim, which
// covers the pause, needlessly long.
inline constexpr std::chrono::milliseconds kMaxBatchPause =
    std::chrono::minutes(1);

struct SweepOptions {
  int batch_size = 1000;   // rows per batch, > 0
  int max_batches = 1000;  // batches per sweep, > 0
  // Bounds each batch statement on the server.
  std::chrono::milliseconds statement_timeout = std::chrono::seconds(10);
  // How long this sweep's claim on the topic lasts; renewed before each
  // batch, so it should exceed statement_timeout. At most kMaxTtl. Each renewal
  // also covers batch_pause, so a pause never lets the claim lapse.
  std::chrono::milliseconds claim_ttl = std::chrono::seconds(60);
  // Pacing: how long to wait after each committed full batch before the next
  // one, 0..60 s and shorter than claim_ttl; 0 (the default) runs the
  // batches back to back. Back-to-back batches compete with the topic's
  // lockers for CPU and WAL on a small machine; a pause trades sweep rate for
  // their latency. No pause follows a short batch (the sweep is done) or the
  // max_batches-th one (the sweep returns). During a pause the connection is
  // idle, outside any transaction (no locks, no snapshot), and Cancel() ends
  // the pause, and the sweep, at once.
  std::chrono::milliseconds batch_pause{0};
  // Pacing by share of time, in (0, 1]: below 1, each full batch that took
  // d is followed by a pause of d * (1 - duty_cycle) / duty_cycle when that
  // is longer than batch_pause (at most 60 s and claim_ttl), so the sweep
  // spends at most this share of its time in batches. A fixed pause cannot
  // do that: when a busy server makes each batch slow, the same pause leaves
  // the sweep a larger share. 1 (the default) adds nothing to batch_pause.
  // The claim is renewed to cover such a pause before it starts.
  double duty_cycle = 1.0;
  // Names this process in janitor_state.claimed_by; empty = host:pid:n,
  // unique per sweep.
  // Two sweeps with the same owner do not exclude each other.
  std::string owner;
};

// A rule a SweepOptions breaks: the field, as SweepOptions names it, and
// what is wrong with it, e.g. {"duty_cycle", "must be in (0, 1], got 2"}.
struct SweepOptionsError {
  std::string field;
  std::string message;
};

// The first rule `options` breaks, or nullopt: the checks SweepHeadless and
// CompactLog make before anything runs (their InvalidArgument says
// "<field> <message>"). One message per rule, for a program (compactiond's
// configuration) to check its settings with before it sweeps.
COMPACTION_EXPORT std::optional<SweepOptionsError> CheckSweepOptions(
    const SweepOptions& options);

struct SweepResult {
  std::int64_t deleted = 0;  // rows deleted by committed batches
  int batches = 0;           // batches committed
  // max_batches ran, all full: rows may remain. CompactLog leaves it false
  // for a pass that deleted nothing and could not move its positions (an
  // older transaction still open): repeating it at once would not help.
  bool stopped_at_limit = false;
  bool skipped = false;    // another owner held the topic's claim
  std::string claimed_by;  // that owner, when skipped
  bool cancelled = false;  // Cancel() stopped the sweep early
  // Our claim lapsed (a batch outlasted claim_ttl) and another owner took
  // the topic over; the sweep stopped and left the bookkeeping to it.
  bool lost_claim = false;
};

// What one CompactLog pass did: a sweep's figures, `deleted` counting the
// messages removed (superseded or lost versions, unkeyed and non-compacted
// messages past the topic's retention, expired tombstones), and the keys
// whose tombstone head expired (their rows turned headless).
struct CompactResult : SweepResult {
  std::int64_t tombstones_expired = 0;
};

class COMPACTION_EXPORT Janitor {
 public:
  explicit Janitor(Client& client);
  ~Janitor();

  // Sweeps one topic's expired headless rows. Throws InvalidArgument (bad name
  // or options, before any I/O), TopicNotFound, or the error of the failing
  // batch, whose DatabaseError is recorded in janitor_state.last_error. Each
  // sweep that took the claim records its start, finish and rows deleted; a
  // success also sets last_success_at and clears last_error, a cancelled sweep
  // sets last_error to "cancelled".
  //
  // A stop requested on `stop` (from any thread) acts as Cancel() for this
  // sweep: the requesting thread cancels the running statement or ends the
  // pause. A token already stopped ends the sweep before its first batch,
  // `cancelled` set. So one std::stop_source can stop every sweep of a
  // process at shutdown, whichever Janitor runs it.
  SweepResult SweepHeadless(const std::string& topic_name,
                            const SweepOptions& options = {},
                            std::stop_token stop = {});

  // The log cleaner: one pass over a topic's log, in batches paced,
  // bounded and cancelled like SweepHeadless (same options, its own claim
  // and bookkeeping in log_cleaner_state). Removes every message that is
  // not its key's head and is older than the topic's retention, never a
  // head's message; expires tombstone heads older than the topic's
  // tombstone_retention (deletes the tombstone, turns the key's row
  // headless) under FOR UPDATE SKIP LOCKED, so it never waits on a locked
  // key. A pass costs what it deletes plus what was written since the
  // cleaner's position, not the log's size. Same errors and `stop` as
  // SweepHeadless.
  CompactResult CompactLog(const std::string& topic_name,
                           const SweepOptions& options = {},
                           std::stop_token stop = {});

  // Stops the sweep in flight: cancels its running statement (PQcancel),
  // whose batch rolls back, or ends its batch_pause, and starts no further
  // batch. That sweep returns normally with `cancelled` set. A Cancel() with
  // no sweep in flight has no effect on later sweeps. Safe from any thread;
  // blocks on the network while a statement runs (not during a pause).
  void Cancel();

 private:
  struct InFlight;
  std::shared_ptr<detail::ClientCore> core_;
  std::shared_ptr<InFlight> in_flight_;
};

}  // namespace compaction
