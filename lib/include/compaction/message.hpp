// Message types, stored messages and the (de)serialization contract.
//
// A message type M declares `static constexpr int kSchemaVersion` and has
// nlohmann_json `to_json`/`from_json` found by ADL. RawMessage is the untyped
// message for tools: it keeps whatever schema version is stored.
#pragma once

#include <chrono>
#include <concepts>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "compaction/errors.hpp"

namespace compaction {

// A message that carries its own schema version and any JSON payload.
// The largest schema_version a message may carry. A head with a higher
// version wins over every produce of a lower one, so a stray huge version
// would pin its key for every writer; real versions count releases.
inline constexpr int kMaxSchemaVersion = 1000000;

struct RawMessage {
  int schema_version = 1;
  nlohmann::json payload;  // null for a tombstone
  // A tombstone (stored payload SQL NULL): once its key's head, the key has
  // no value. Reads of RawMessage history show them; typed reads skip them.
  bool tombstone = false;
  bool operator==(const RawMessage&) const = default;
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

// Encodes/decodes one message type. Specialized for RawMessage below.
template <class M>
struct Codec {
  static int SchemaVersion(const M&) { return M::kSchemaVersion; }
  static nlohmann::json Encode(const M& m) { return nlohmann::json(m); }
  static M Decode(const char* operation, const RawStored& raw) {
    if (raw.schema_version != M::kSchemaVersion) {
      throw MessageSchemaVersionMismatch(operation, raw.id, raw.schema_version,
                                         M::kSchemaVersion);
    }
    try {
      return raw.message.payload.template get<M>();
    } catch (const nlohmann::json::exception& e) {
      throw MessageDecodeError(operation, raw.id, e.what());
    }
  }
};

template <>
struct Codec<RawMessage> {
  static int SchemaVersion(const RawMessage& m) { return m.schema_version; }
  static nlohmann::json Encode(const RawMessage& m) { return m.payload; }
  static RawMessage Decode(const char*, const RawStored& raw) {
    return raw.message;
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
