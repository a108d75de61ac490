// Keys a client saw with a head: LockCompactionHead sends the lock of one
// the seed's way (lock.cpp).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace compaction::detail {

// A hint, never a fact: a key that lost its head row since (the janitor,
// the cleaner, a schema installed again), a hash shared by another key, or
// a key pushed out by others costs its lock one more round trip, never a
// wrong answer (the lock checks what it finds). So keys are kept as 64-bit
// hashes in a fixed table of atomics, a pair of slots per key in one cache
// line (the newest key of the pair, and the one before it). A look-up
// takes no lock and writes nothing, so the threads of a client never
// contend on it (the mutex and hash set before it were the client's
// costliest function in the 4-thread increment's profile;
// test/bench/RESULTS.md). Thread-safe.
class HeadHints {
 public:
  HeadHints() = default;
  HeadHints(const HeadHints&) = delete;
  HeadHints& operator=(const HeadHints&) = delete;
  ~HeadHints();

  bool Has(std::int64_t topic_id, const std::string& key) const;
  // Remembers (`has_head`) or forgets the key.
  void Set(std::int64_t topic_id, const std::string& key, bool has_head);

  // 1 MB, allocated on the first key remembered.
  static constexpr std::size_t kSlots = std::size_t{1} << 17;
  // The first slot of the key's pair (for tests).
  static std::size_t PairOf(std::int64_t topic_id, const std::string& key);

 private:
  using Slot = std::atomic<std::uint64_t>;
  static std::uint64_t Hash(std::int64_t topic_id, const std::string& key);
  Slot* Table() const { return table_.load(std::memory_order_acquire); }
  Slot* TableForWrite();

  mutable std::atomic<Slot*> table_{nullptr};
};

}  // namespace compaction::detail
