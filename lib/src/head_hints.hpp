// What a client learned about the keys it locks: which it saw with a head
// (LockCompactionHead sends the lock of one the seed's way), and whether
// a topic's other keys tend to be new (it then sends the insert first;
// lock.cpp).
#pragma once

#include <array>
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

// Whether the keys of a topic that this client locks without a hint (keys
// it never saw with a head) have mostly turned out headless: new, or
// without a value yet. Then the lock sends its insert first, which costs a
// new key one statement instead of lock_<id>'s two, and a key with a head
// one round trip more (lock.cpp). A score per topic: a headless outcome
// raises it by one, up to kCap; a head lowers it by kHeadCost; the insert
// goes first from kLikely on, so it takes about four headless keys in five
// to keep it. Like the hints, a guess the lock checks, never a fact: racing
// threads may lose an update of the score, which only delays a switch.
// Thread-safe.
class NewKeyOdds {
 public:
  static constexpr int kCap = 32;
  static constexpr int kLikely = 16;
  static constexpr int kHeadCost = 4;

  bool Likely(std::int64_t topic_id) const {
    return Score(topic_id).load(std::memory_order_relaxed) >= kLikely;
  }
  // What a lock of an unhinted key of the topic found.
  void Record(std::int64_t topic_id, bool headless);

 private:
  // Topics share a score when their ids are equal modulo the size: a
  // client locking in more topics than that blends their odds.
  std::atomic<int>& Score(std::int64_t topic_id) const {
    return scores_[static_cast<std::uint64_t>(topic_id) % scores_.size()];
  }

  mutable std::array<std::atomic<int>, 64> scores_{};
};

}  // namespace compaction::detail
