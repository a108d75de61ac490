#include "locked_keys.hpp"

#include <algorithm>
#include <string>
#include <utility>

#include "compaction/errors.hpp"

namespace compaction::detail {

// A transaction locks a handful of keys, rarely more: a sorted vector
// keeps the look-up cheap without a node per key.
void TxState::RememberLockedKey(std::int64_t topic_id, const std::string& key) {
  auto entry = std::make_pair(topic_id, key);
  auto at = std::lower_bound(locked_keys_.begin(), locked_keys_.end(), entry);
  if (at == locked_keys_.end() || *at != entry) {
    locked_keys_.insert(at, std::move(entry));
  }
}

bool TxState::HoldsLockedKey(std::int64_t topic_id,
                             const std::string& key) const {
  return std::binary_search(locked_keys_.begin(), locked_keys_.end(),
                            std::make_pair(topic_id, key));
}

void RefuseUncompactedLockedKey(const TxState& state, std::int64_t topic_id,
                                const ProduceOptions& options) {
  if (options.compaction || !options.message_key) return;
  if (!state.HoldsLockedKey(topic_id, *options.message_key)) return;
  throw InvalidArgument(
      "Produce",
      "this transaction holds the message's key through "
      "LockCompactionHead, but the message has no compaction options, so "
      "it would not move the key's head: set "
      "ProduceOptions::compaction, or write through the key handle "
      "(KeyHandle::ProduceInTx or Update)");
}

}  // namespace compaction::detail
