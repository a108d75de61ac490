// The headless sweep's batch: deletes a topic's expired headless rows (no
// head, last locked longer ago than the topic's headless_ttl).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "compaction/janitor.hpp"
#include "sweep/loop.hpp"

namespace compaction::sweep {

class HeadlessBatches final : public BatchKind {
 public:
  // `core` and `options` outlive this object (one sweep).
  HeadlessBatches(detail::ClientCore& core, const SweepOptions& options)
      : core_(core), options_(options) {}

  const char* operation() const override { return kOperation; }
  Ledger ledger() const override { return kHeadlessLedger; }
  Batch RunBatch(pg::Session s, std::int64_t topic_id) override;

  static constexpr const char* kOperation = "SweepHeadless";

 private:
  // Where the previous batch of this sweep ended: the greatest deleted
  // (idle_since, message_key), idle_since in the server's text form.
  struct Cursor {
    std::string idle_since;
    std::string message_key;
  };

  detail::ClientCore& core_;
  const SweepOptions& options_;
  std::optional<Cursor> cursor_;  // none: start at the oldest row
};

}  // namespace compaction::sweep
