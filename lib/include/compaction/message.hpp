// Message types, stored messages and the (de)serialization contract.
//
// A message type M declares `static constexpr int kSchemaVersion` and has
// nlohmann_json `to_json`/`from_json` found by ADL. RawMessage is the untyped
// message for tools: it keeps whatever schema version is stored.
#pragma once

#include <chrono>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>

#include "compaction/errors.hpp"
#include "compaction/export.hpp"

namespace compaction {

// A message that carries its own schema version and any JSON payload.
// The largest schema_version a message may carry. A head with a higher
// version wins over every produce of a lower one, so a stray huge version
// would pin its key for every writer; real versions count releases.
inline constexpr int kMaxSchemaVersion = 1000000;

struct RawMessage {
  int schema_version = 1;
  // null for a tombstone. nlohmann_json holds numbers as int64, uint64 or
  // double, and jsonb holds any decimal: a stored integer beyond 64 bits
  // reads as the nearest double, a number beyond double range (1e400) as
  // +-infinity (which Produce refuses); payload_text has the exact digits.
  nlohmann::json payload;
  // A tombstone (stored payload SQL NULL): once its key's head, the key has
  // no value. Reads of RawMessage history show them; typed reads skip them.
  bool tombstone = false;
  // Set by reads: the payload exactly as stored (jsonb's text form), empty
  // for a tombstone. Produce ignores it and sends `payload`.
  std::string payload_text = {};
  // Compares what Produce sends, so a read message equals the one written.
  bool operator==(const RawMessage& other) const {
    return schema_version == other.schema_version && payload == other.payload &&
           tombstone == other.tombstone;
  }
};

template <class M>
concept TypedMessage = requires(const M& m, nlohmann::json& j) {
  { M::kSchemaVersion } -> std::convertible_to<int>;
  {nlohmann::json(m)};
  {j.get<M>()};
};

template <class M>
concept Message = TypedMessage<M> || std::same_as<M, RawMessage>;

struct CompactionOptions {
  // Orders versions of one key: a higher (schema_version, rank, id) wins.
  std::int64_t rank = 0;
};

struct ProduceOptions {
  std::optional<std::string> message_key;
  // Set: this message is a version of its key and competes for the head.
  std::optional<CompactionOptions> compaction;
};

struct ProduceResult {
  std::int64_t id = 0;
  std::chrono::system_clock::time_point created_at;
  // True when this message became its key's compaction head.
  bool head_advanced = false;
  // Compacted produces of this Producer (and its copies) that did not
  // become their key's head, this one included: the key's head already
  // ranked higher. A head with a higher schema_version wins over every
  // produce of a lower one, so an old writer next to a newer one sees this
  // count grow instead of its values land.
  std::int64_t not_advanced = 0;
};

// The most messages one ProduceBatch call takes; a larger batch is
// InvalidArgument (split it: each call is one transaction and one round
// trip, and its array parameters must stay well under PostgreSQL's
// 1 GB limit on one value).
inline constexpr std::size_t kMaxBatchSize = 10000;

// One element of Producer<M>::ProduceBatch: a message and how to produce it.
template <class M>
struct Outgoing {
  // Empty: a tombstone, which needs options.message_key and
  // options.compaction (at M::kSchemaVersion). A RawMessage has no version
  // of its own: its tombstone is a RawMessage{version, nullptr, true}, and
  // an empty one is InvalidArgument.
  std::optional<M> message;
  ProduceOptions options;
};

template <class M>
struct StoredMessage {
  std::int64_t id = 0;
  std::string message_key;  // empty for a message produced without a key
  int schema_version = 0;
  std::optional<std::int64_t> compaction_rank;
  std::chrono::system_clock::time_point created_at;
  M message;
};

namespace detail {

// A stored row before decoding; what the non-template code returns.
using RawStored = StoredMessage<RawMessage>;

// Numbers a typed decode must not take blindly: nlohmann_json casts a
// double into an integer field unchecked (undefined beyond 2^63; INT64_MIN
// in practice) and an unsigned above INT64_MAX wraps. ZeroWideNumbers
// returns false when `payload` has none; else it sets `zeroed` to a copy
// with each set to 0, to decode once without the cast. A number beyond
// double range is a MessageDecodeError. CheckWideNumbers throws one when
// `encoded` (that decode, encoded again) has an integer where `payload`
// has such a number: the field cannot hold it.
COMPACTION_EXPORT bool ZeroWideNumbers(const char* operation,
                                       std::int64_t message_id,
                                       const nlohmann::json& payload,
                                       nlohmann::json& zeroed);
COMPACTION_EXPORT void CheckWideNumbers(const char* operation,
                                        std::int64_t message_id,
                                        const nlohmann::json& payload,
                                        const nlohmann::json& encoded);
// The reason a MessageDecodeError gives for a from_json failure, without
// the payload text a parse error would quote.
COMPACTION_EXPORT std::string DecodeReason(const nlohmann::json::exception& e);

// Encodes/decodes one message type. Specialized for RawMessage below.
template <class M>
struct Codec {
  static int SchemaVersion(const M&) { return M::kSchemaVersion; }
  static nlohmann::json Encode(const M& m) { return nlohmann::json(m); }
  static M Decode(const char* operation, RawStored& raw) {
    if (raw.schema_version != M::kSchemaVersion) {
      throw MessageSchemaVersionMismatch(operation, raw.id, raw.schema_version,
                                         M::kSchemaVersion);
    }
    const nlohmann::json& payload = raw.message.payload;
    nlohmann::json zeroed;
    if (ZeroWideNumbers(operation, raw.id, payload, zeroed)) {
      CheckWideNumbers(operation, raw.id, payload,
                       nlohmann::json(Get(operation, raw.id, zeroed)));
    }
    return Get(operation, raw.id, payload);
  }

 private:
  static M Get(const char* operation, std::int64_t id,
               const nlohmann::json& payload) {
    try {
      return payload.template get<M>();
    } catch (const nlohmann::json::exception& e) {
      throw MessageDecodeError(operation, id, DecodeReason(e));
    }
  }
};

template <>
struct Codec<RawMessage> {
  static int SchemaVersion(const RawMessage& m) { return m.schema_version; }
  static const nlohmann::json& Encode(const RawMessage& m) { return m.payload; }
  // Moved, not copied: a copy of a deeply nested value recurses per level.
  static RawMessage Decode(const char*, RawStored& raw) {
    return std::move(raw.message);
  }
};

template <class M>
StoredMessage<M> DecodeStored(const char* operation, RawStored raw) {
  M message = Codec<M>::Decode(operation, raw);
  return StoredMessage<M>{raw.id,
                          std::move(raw.message_key),
                          raw.schema_version,
                          raw.compaction_rank,
                          raw.created_at,
                          std::move(message)};
}

}  // namespace detail
}  // namespace compaction
