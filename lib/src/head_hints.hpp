// Keys a client saw with a head: LockCompactionHead sends the lock of one
// the seed's way (lock.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_set>

namespace compaction::detail {

// A hint, never a fact: a key that lost its head row since (the janitor,
// the cleaner, a schema installed again), or a hash shared by another key,
// costs its lock one more round trip, never a wrong answer (the lock checks
// what it finds). So keys are kept as 64-bit hashes, a bounded number of
// them: the set starts over when full. Thread-safe.
class HeadHints {
 public:
  bool Has(std::int64_t topic_id, const std::string& key) const;
  // Remembers (`has_head`) or forgets the key.
  void Set(std::int64_t topic_id, const std::string& key, bool has_head);

  // About 3 MB at most (hashes, nodes and buckets).
  static constexpr std::size_t kMaxKeys = 1 << 16;

 private:
  static std::uint64_t Hash(std::int64_t topic_id, const std::string& key);

  mutable std::mutex mutex_;
  std::unordered_set<std::uint64_t> keys_;
};

}  // namespace compaction::detail
