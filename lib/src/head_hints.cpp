#include "head_hints.hpp"

#include <algorithm>
#include <functional>

namespace compaction::detail {
namespace {

// The first of the two adjacent slots (one cache line) a hash may live in.
std::size_t FirstSlot(std::uint64_t h) {
  return static_cast<std::size_t>(h >> 1) & (HeadHints::kSlots - 2);
}

// Whether `h` is in its pair of table `t`.
bool PairHolds(const std::atomic<std::uint64_t>* t, std::uint64_t h) {
  const std::size_t i = FirstSlot(h);
  return t[i].load(std::memory_order_relaxed) == h ||
         t[i + 1].load(std::memory_order_relaxed) == h;
}

}  // namespace

HeadHints::~HeadHints() { delete[] table_.load(); }

std::size_t HeadHints::PairOf(std::int64_t topic_id, const std::string& key) {
  return FirstSlot(Hash(topic_id, key));
}

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
  return t != nullptr && PairHolds(t, Hash(topic_id, key));
}

void HeadHints::Set(std::int64_t topic_id, const std::string& key,
                    bool has_head) {
  const std::uint64_t h = Hash(topic_id, key);
  if (!has_head) {
    Slot* t = Table();
    if (t == nullptr) return;
    const std::size_t i = FirstSlot(h);
    for (Slot* s : {&t[i], &t[i + 1]}) {
      std::uint64_t expected = h;
      s->compare_exchange_strong(expected, 0, std::memory_order_relaxed);
    }
    return;
  }
  Slot* t = TableForWrite();
  // Already there (the common case on a lock of a known key): no write.
  if (PairHolds(t, h)) return;
  const std::size_t i = FirstSlot(h);
  // The newest key in the first slot, the one before it in the second: a
  // third key pushes out the older of the two, so two keys in use keep
  // their pair however long another sat in it.
  const std::uint64_t newest = t[i].load(std::memory_order_relaxed);
  if (newest != 0) t[i + 1].store(newest, std::memory_order_relaxed);
  t[i].store(h, std::memory_order_relaxed);
}

void NewKeyOdds::Record(std::int64_t topic_id, bool headless) {
  std::atomic<int>& score = Score(topic_id);
  const int now = score.load(std::memory_order_relaxed);
  const int next =
      headless ? std::min(kCap, now + 1) : std::max(0, now - kHeadCost);
  if (next != now) score.store(next, std::memory_order_relaxed);
}

}  // namespace compaction::detail
