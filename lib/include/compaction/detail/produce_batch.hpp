// The non-template entry point behind Producer<M>::ProduceBatch and
// ProduceBatchInTx. Not for direct use (see entry_points.hpp).
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "compaction/detail/entry_points.hpp"
#include "compaction/errors.hpp"
#include "compaction/export.hpp"
#include "compaction/message.hpp"

namespace compaction {
class Tx;
namespace detail {

inline constexpr const char* kProduceBatchOp = "ProduceBatch";

// One encoded element; `options` points into the caller's batch, which
// outlives the call.
struct BatchElement {
  Outgoing message;
  const ProduceOptions* options = nullptr;
};

// InvalidArgument when a batch of `size` messages is too large; called
// before anything is encoded.
COMPACTION_EXPORT void CheckBatchSize(std::size_t size);

// `error` (raised for element `index` while encoding it) again, with the
// element's index in its message.
[[noreturn]] COMPACTION_EXPORT void ThrowAtElement(
    std::size_t index, const InvalidArgument& error);

// Produces `batch` in one statement, in its own transaction (tx null) or in
// `*tx`. Validates every element first (InvalidArgument naming its index).
COMPACTION_EXPORT std::vector<ProduceResult> ProduceBatch(
    ClientCore& core, Tx* tx, const std::string& topic,
    std::span<const BatchElement> batch);

}  // namespace detail
}  // namespace compaction
