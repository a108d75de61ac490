#include "head_hints.hpp"

#include <functional>

namespace compaction::detail {
namespace {

// The pair of slots a hash may live in: adjacent, so one cache line.
std::size_t PairOf(std::uint64_t h) {
  return static_cast<std::size_t>(h >> 1) & (HeadHints::kSlots - 2);
}

}  // namespace

HeadHints::~HeadHints() { delete[] table_.load(); }

std::uint64_t HeadHints::Hash(std::int64_t topic_id, const std::string& key) {
  // The topic in the hash too: one table serves every topic of the client.
  const std::uint64_t h =
      std::hash<std::string>{}(key) ^
      (static_cast<std::uint64_t>(topic_id) * 0x9e3779b97f4a7c15ULL);
  return h == 0 ? 1 : h;  // 0 marks an empty slot
}

HeadHints::Slot* HeadHints::TableForWrite() {
  if (Slot* t = Table()) return t;
  Slot* fresh = new Slot[kSlots]();
  Slot* expected = nullptr;
  if (table_.compare_exchange_strong(expected, fresh,
                                     std::memory_order_acq_rel)) {
    return fresh;
  }
  delete[] fresh;  // another thread's table won
  return expected;
}

bool HeadHints::Has(std::int64_t topic_id, const std::string& key) const {
  const Slot* t = Table();
  if (t == nullptr) return false;
  const std::uint64_t h = Hash(topic_id, key);
  const std::size_t i = PairOf(h);
  return t[i].load(std::memory_order_relaxed) == h ||
         t[i + 1].load(std::memory_order_relaxed) == h;
}

void HeadHints::Set(std::int64_t topic_id, const std::string& key,
                    bool has_head) {
  const std::uint64_t h = Hash(topic_id, key);
  if (!has_head) {
    Slot* t = Table();
    if (t == nullptr) return;
    const std::size_t i = PairOf(h);
    for (Slot* s : {&t[i], &t[i + 1]}) {
      std::uint64_t expected = h;
      s->compare_exchange_strong(expected, 0, std::memory_order_relaxed);
    }
    return;
  }
  Slot* t = TableForWrite();
  const std::size_t i = PairOf(h);
  // Already there (the common case on a lock of a known key): no write.
  if (t[i].load(std::memory_order_relaxed) == h ||
      t[i + 1].load(std::memory_order_relaxed) == h) {
    return;
  }
  for (Slot* s : {&t[i], &t[i + 1]}) {
    std::uint64_t empty = 0;
    if (s->compare_exchange_strong(empty, h, std::memory_order_relaxed)) {
      return;
    }
  }
  // Both taken by other keys: one of them goes, by a bit of the hash.
  t[i + (h & 1)].store(h, std::memory_order_relaxed);
}

}  // namespace compaction::detail
