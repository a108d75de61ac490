// The lock of a key's compaction-head row, for the library's own callers.
#pragma once

#include <optional>
#include <string>

#include "compaction/detail/entry_points.hpp"
#include "compaction/tx.hpp"
#include "core.hpp"

namespace compaction::detail {

struct LockedRow {
  // The locked head, a tombstone included; empty for a headless row.
  std::optional<RawStored> head;
};

// The statement calling the topic's lock_<id> (built once per topic:
// ClientCore::Sql).
std::string LockSql(const ClientCore& core, std::int64_t id);
// The seed's lock of an existing row and the read of its head, for a key
// the client saw with a head (built once per topic as well).
std::string LockRowSql(const ClientCore& core, std::int64_t id);
std::string ReadLockedHeadSql(const ClientCore& core, std::int64_t id);
// The insert-first lock of a key the client expects to be new (built once
// per topic as well).
std::string InsertLockSql(const ClientCore& core, std::int64_t id);
// CompactionHead's read of one key's head (built once per topic as well;
// its text depends on the partitions on Citus).
std::string ReadHeadSql(const ClientCore& core, const TopicInfo& topic);

// LockHead, keeping a tombstone head (its schema_version and rank still
// decide what can win over it).
LockedRow LockHeadRow(ClientCore& core, Tx& tx, const std::string& topic,
                      const std::string& key, const LockOptions& options);

}  // namespace compaction::detail
