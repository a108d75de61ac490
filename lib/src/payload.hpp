// Payload JSON: what Produce refuses before sending, and how stored payload
// text is parsed back (the exported halves are in compaction/message.hpp and
// compaction/detail/entry_points.hpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>

namespace compaction::detail {

// Containers nested deeper than this are refused at produce time.
// PostgreSQL's jsonb input recurses per level under max_stack_depth: at the
// default 2MB it takes about 10,000 levels, at the smallest allowed setting
// (100kB) fewer than 700 (measured on PostgreSQL 15: 600 objects parse, 700
// fail with 54001). 512 holds at every setting a server may have.
inline constexpr std::size_t kMaxPayloadDepth = 512;

// Throws InvalidArgument when `payload` holds a NaN or infinite number, a
// NUL character in a string or member name, or nests deeper than
// kMaxPayloadDepth; the message names the problem and where it is.
void ValidatePayload(const char* operation, const nlohmann::json& payload);

// Parses a stored payload (jsonb's text output). A number beyond double
// range reads as +-infinity instead of failing the whole payload; every
// other error is a MessageDecodeError that carries no payload text.
nlohmann::json ParseStoredPayload(const char* operation,
                                  std::int64_t message_id, const char* text,
                                  std::size_t length);

}  // namespace compaction::detail
