// The log cleaner's batch kind: removes messages that are no longer their
// key's head once they are older than the topic's retention, and expires
// tombstones that have been their key's head longer than the topic's
// tombstone_retention (the tombstone goes, the key's row turns headless).
//
// A pass walks the log in id order from the cleaner's final position
// (log_cleaner_state): first the tombstones (through the partial index of
// payload IS NULL), then every message. Each walk stops at the first
// message still inside its retention, or at the first it could not lock,
// so what it passed is done. Cost: what it deletes plus what was written
// since the position, never the log's size. Why positions turn final only
// later: sql/system_v1.sql, log_cleaner_state.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "compaction/janitor.hpp"
#include "sweep/loop.hpp"

namespace compaction::sweep {

inline constexpr Ledger kCleanerLedger{"log_cleaner_state"};

class CleanerBatches final : public BatchKind {
 public:
  // `core` and `options` outlive this object (one pass).
  CleanerBatches(detail::ClientCore& core, const SweepOptions& options)
      : core_(core), options_(options) {}

  const char* operation() const override { return kOperation; }
  Ledger ledger() const override { return kCleanerLedger; }
  Batch RunBatch(pg::Session s, std::int64_t topic_id) override;

  // Tombstoned keys this pass turned headless (committed batches).
  std::int64_t tombstones_expired() const { return tombstones_expired_; }

  // True when this pass recorded no new final or pending position for
  // either walk. Each walk starts from its final position; while a pending
  // one is recorded, the final position follows the walk only once the
  // pending one is final. So a pass records nothing while an older
  // transaction holds the pending position back, and the next pass walks
  // the same range again.
  bool stalled() const {
    return loaded_ && !tombstones_.moved() && !messages_.moved();
  }

  static constexpr const char* kOperation = "CompactLog";

  // How many tombstoned keys a pass counts at most (TopicStats).
  static constexpr std::int64_t kMaxTombstonedKeysCounted = 100000;

 private:
  // One walk's position, as stored and as this pass moved it.
  struct Cursor {
    std::int64_t position = 0;            // final (stored)
    std::optional<std::int64_t> pending;  // stored pending position
    std::string pending_xmax;             // its xid8, as text
    bool pending_final = false;  // every xid below pending_xmax had ended
                                 // when this pass started
    bool pending_ours = false;   // set by this pass
    std::int64_t start = 0;      // the final position this pass started at
    std::int64_t at = 0;         // where this pass got to
    bool done = false;           // this pass's walk is over
    // Moves to `frontier`, reached under a snapshot whose xmax is `xmax`.
    void Advance(std::int64_t frontier, const std::string& xmax);
    // Whether this pass recorded anything: a new final or pending position.
    bool moved() const { return position != start || pending_ours; }
  };

  // The outcome of one walk's batch.
  struct Step {
    std::int64_t deleted = 0;
    std::int64_t expired = 0;
    std::int64_t frontier = 0;
    bool full = false;
    std::optional<std::string> next_created_at;  // message walk only
    std::string xmax;
  };

  void Load(pg::Session s, std::int64_t topic_id);
  Step TombstoneStep(pg::Session s, std::int64_t topic_id);
  Step MessageStep(pg::Session s, std::int64_t topic_id);
  void CountTombstonedKeys(pg::Session s, std::int64_t topic_id);
  void Save(pg::Session s, std::int64_t topic_id, std::int64_t expired);

  detail::ClientCore& core_;
  const SweepOptions& options_;
  bool loaded_ = false;
  bool first_save_ = true;
  Cursor tombstones_;
  Cursor messages_;
  std::optional<std::string> next_created_at_;
  std::int64_t tombstoned_keys_ = 0;
  std::int64_t tombstones_expired_ = 0;
};

}  // namespace compaction::sweep
