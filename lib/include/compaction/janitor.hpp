// Janitor: deletes expired headless rows of a topic in bounded batches.
//
// Each batch is its own short transaction that picks rows through the
// idle_since partial index with FOR UPDATE SKIP LOCKED and re-checks
// `head_id IS NULL AND updated_at < now() - ttl` in the DELETE, so a sweep
// never waits on a locked key and never deletes a materialized head. The
// cutoff comes from the server clock and the topic row.
//
// Lifetime: borrows the Client, which must outlive it. Thread safety:
// SweepHeadless runs one sweep at a time per Janitor; Cancel() may be called
// from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

namespace compaction {

class Client;

struct SweepOptions {
  int batch_size = 1000;   // rows per batch, > 0
  int max_batches = 1000;  // batches per sweep, > 0
  // Bounds each batch statement on the server.
  std::chrono::milliseconds statement_timeout = std::chrono::seconds(10);
  // How long this sweep's claim on the topic lasts; renewed per batch.
  std::chrono::milliseconds claim_ttl = std::chrono::seconds(60);
  // Names this process in janitor_state.claimed_by; empty = host:pid.
  std::string owner;
};

struct SweepResult {
  std::int64_t deleted = 0;
  int batches = 0;
  bool stopped_at_limit = false;  // max_batches ran and the last was full
  bool skipped = false;           // another owner held the topic's claim
  std::string claimed_by;         // that owner, when skipped
  bool cancelled = false;         // Cancel() stopped the sweep early
};

class Janitor {
 public:
  explicit Janitor(Client& client);
  ~Janitor();

  // Sweeps one topic. Throws InvalidArgument (bad options), TopicNotFound,
  // or the database error of the failing batch (recorded in janitor_state).
  SweepResult SweepHeadless(const std::string& topic_name,
                            const SweepOptions& options = {});

  // Stops the sweep in flight after cancelling its running statement
  // (PQcancel); later sweeps run normally. Safe from any thread.
  void Cancel();

 private:
  struct InFlight;
  Client& client_;
  std::shared_ptr<InFlight> in_flight_;
};

}  // namespace compaction
