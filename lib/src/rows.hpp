// Decoding of stored-message rows. Every query returning messages selects
// kMessageColumns (with the message table aliased `m`), in this order.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "compaction/errors.hpp"
#include "compaction/message.hpp"
#include "payload.hpp"
#include "pg/connection.hpp"

namespace compaction::detail {

// SQL for a timestamptz column as microseconds since the Unix epoch, which
// FromMicros turns back into a time_point.
// 1e6 is a numeric literal: numeric * numeric is a built-in operator with
// exactly these types, so no look-alike reached through an implicit cast
// can stand in for it (another role may plant one: doc/security.md).
//
// Clamped to 1900..2200: a planted infinity would fail the statement (no
// bigint holds it) and a year like 9999 would overflow the nanosecond
// system_clock; a stored time outside that range reads as its bound.
inline std::string Micros(const std::string& column) {
  // greatest() and least() skip NULLs: a NULL stays NULL through the CASE.
  return "(extract(epoch FROM CASE WHEN " + column +
         " IS NULL THEN NULL ELSE least(greatest(" + column +
         ", '1900-01-01 00:00+00'::timestamptz), "
         "'2200-01-01 00:00+00'::timestamptz) END) * 1e6)::bigint";
}

// Micros without the clamp, for the per-topic stats statement, which must
// stay short enough to show whole in pg_stat_activity (its bookkeeping
// columns are the sweeps' own; a planted infinity there fails that one
// topic's figures, and a listing reports the error for it alone).
inline std::string ShortMicros(const std::string& column) {
  return "(extract(epoch FROM " + column + ") * 1e6)::bigint";
}

inline const std::string kMessageColumns =
    "m.id, m.message_key, m.schema_version, m.compaction_rank, " +
    Micros("m.created_at") + ", m.payload::text";

inline std::chrono::system_clock::time_point FromMicros(std::int64_t us) {
  return std::chrono::system_clock::time_point(
      std::chrono::duration_cast<std::chrono::system_clock::duration>(
          std::chrono::microseconds(us)));
}

inline RawStored ParseStored(const char* operation, const pg::Result& r,
                             int row, int col) {
  RawStored out;
  out.id = pg::Int64(r, row, col);
  out.message_key = std::string(pg::Text(r, row, col + 1));
  out.schema_version = static_cast<int>(pg::Int64(r, row, col + 2));
  out.compaction_rank = pg::OptInt64(r, row, col + 3);
  out.created_at = FromMicros(pg::Int64(r, row, col + 4));
  out.message.schema_version = out.schema_version;
  if (pg::IsNull(r, row, col + 5)) {
    out.message.tombstone = true;  // payload stays JSON null
    return out;
  }
  const std::string_view payload = pg::Text(r, row, col + 5);
  const char* text = payload.data();
  const std::size_t length = payload.size();
  out.message.payload = ParseStoredPayload(operation, out.id, text, length);
  out.message.payload_text.assign(text, length);
  return out;
}

inline std::vector<RawStored> ParseAllStored(const char* operation,
                                             const pg::Result& r) {
  std::vector<RawStored> out;
  out.reserve(r.rows());
  for (int row = 0; row < r.rows(); ++row) {
    out.push_back(ParseStored(operation, r, row, 0));
  }
  return out;
}

}  // namespace compaction::detail
