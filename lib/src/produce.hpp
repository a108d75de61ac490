// What single produces and batches share.
#pragma once

#include "compaction/detail/entry_points.hpp"
#include "compaction/message.hpp"

namespace compaction::detail {

// InvalidArgument (under `operation`) unless `message` with `options` is a
// message Produce may send: a tombstone needs compaction, compaction needs
// a key, the key and the schema version must be valid.
void ValidateProduce(const char* operation, const Outgoing& message,
                     const ProduceOptions& options);

}  // namespace compaction::detail
