// Non-template entry points behind the typed handles (TopicHandle, KeyHandle,
// Producer). Not for direct use: each takes the client's internal state,
// which only the handles hold. All SQL and libpq live behind these
// declarations; the templates only (de)serialize.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "compaction/export.hpp"
#include "compaction/message.hpp"
#include "compaction/options.hpp"
#include "compaction/stats.hpp"

namespace compaction {
class Tx;
namespace detail {

class ClientCore;  // connection pool, schema name, topic-id cache

struct Outgoing {
  int schema_version = 0;
  std::string payload_json;
  bool tombstone = false;  // stores payload NULL; payload_json is unused
};

COMPACTION_EXPORT TopicInfo RegisterTopic(ClientCore& core,
                                          const std::string& topic,
                                          const TopicConfig& config);
COMPACTION_EXPORT void DestroyTopic(ClientCore& core, const std::string& topic);
COMPACTION_EXPORT TopicInfo FindTopic(ClientCore& core,
                                      const std::string& topic);
COMPACTION_EXPORT TopicStats GetTopicStats(ClientCore& core,
                                           const std::string& topic,
                                           const StatsOptions& options);

COMPACTION_EXPORT std::optional<RawStored> ReadHead(ClientCore& core,
                                                    const std::string& topic,
                                                    const std::string& key);
COMPACTION_EXPORT std::optional<RawStored> LockHead(ClientCore& core, Tx& tx,
                                                    const std::string& topic,
                                                    const std::string& key,
                                                    const LockOptions& options);
// Newest first; tombstones only when `with_tombstones` (RawMessage reads).
COMPACTION_EXPORT std::vector<RawStored> KeyMessages(ClientCore& core,
                                                     const std::string& topic,
                                                     const std::string& key,
                                                     int limit,
                                                     bool with_tombstones);
COMPACTION_EXPORT std::vector<RawStored> ListHeads(ClientCore& core,
                                                   const std::string& topic,
                                                   const ListOptions& options);

// Both resolve the topic by name: Produce through the client's cache,
// re-resolving once when the cached topic was destroyed (and perhaps
// re-created); ProduceInTx through the caller's transaction, unless that
// transaction already locked or produced to the topic.
COMPACTION_EXPORT ProduceResult Produce(ClientCore& core,
                                        const std::string& topic,
                                        const Outgoing& message,
                                        const ProduceOptions& options);
COMPACTION_EXPORT ProduceResult ProduceInTx(ClientCore& core, Tx& tx,
                                            const std::string& topic,
                                            const Outgoing& message,
                                            const ProduceOptions& options);

// KeyHandle::Update. `fn` receives the locked key's value (empty: none, or
// a tombstone) and returns the message to produce (empty: nothing). The
// result is empty when `fn` produced nothing.
using UpdateFn =
    std::function<std::optional<Outgoing>(std::optional<RawStored>)>;
struct Updated {
  ProduceResult result;
  int schema_version = 0;
  std::int64_t rank = 0;
};
COMPACTION_EXPORT std::optional<Updated> UpdateKey(ClientCore& core,
                                                   const std::string& topic,
                                                   const std::string& key,
                                                   const UpdateOptions& options,
                                                   const UpdateFn& fn);

// Serializes a payload. InvalidArgument, before anything is sent, for what
// jsonb would refuse or nlohmann_json would dump as something else: a NaN or
// infinite number (dumped as null), a NUL character in a string or member
// name, containers nested deeper than 512 levels, invalid UTF-8.
COMPACTION_EXPORT std::string DumpPayload(const char* operation,
                                          const nlohmann::json& payload);

}  // namespace detail
}  // namespace compaction
