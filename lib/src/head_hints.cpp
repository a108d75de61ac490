#include "head_hints.hpp"

#include <functional>

namespace compaction::detail {

std::uint64_t HeadHints::Hash(std::int64_t topic_id, const std::string& key) {
  // The topic in the hash too: one set serves every topic of the client.
  const std::uint64_t h = std::hash<std::string>{}(key);
  return h ^ (static_cast<std::uint64_t>(topic_id) * 0x9e3779b97f4a7c15ULL);
}

bool HeadHints::Has(std::int64_t topic_id, const std::string& key) const {
  const std::uint64_t h = Hash(topic_id, key);
  std::lock_guard lock(mutex_);
  return keys_.count(h) != 0;
}

void HeadHints::Set(std::int64_t topic_id, const std::string& key,
                    bool has_head) {
  const std::uint64_t h = Hash(topic_id, key);
  std::lock_guard lock(mutex_);
  if (!has_head) {
    keys_.erase(h);
    return;
  }
  if (keys_.size() >= kMaxKeys) keys_.clear();
  keys_.insert(h);
}

}  // namespace compaction::detail
