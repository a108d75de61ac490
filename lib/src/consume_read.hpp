// The batch read of a consumer's partition (consume_read.cpp) and the SQL
// snippets Poll and Wait share.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "compaction/consumer.hpp"
#include "core.hpp"

namespace compaction::detail {

// Where a partition's consumer stands: every message whose writing
// transaction is visible in `done` is consumed; `read`, when set, is the
// newer snapshot being walked, and (cursor_xid, cursor_id) the last message
// delivered from it.
struct Position {
  std::string done;
  std::optional<std::string> read;
  std::optional<std::string> cursor_xid;
  std::optional<std::int64_t> cursor_id;
};

// Reads up to `limit` deliveries of `partition` after `position` and moves
// `position` past them (in memory only). Opens a new window when the current
// one runs out, at most once, so an empty result means nothing new.
std::vector<RawDelivery> ReadBatch(ClientCore& core, pg::Session s,
                                   std::int64_t topic_id, int partition,
                                   bool heads_only, int limit,
                                   Position& position);

// SQL true when the consumer position aliased `p` may have messages to
// read in message table `message`: a window is open, or a message of its
// partition was committed by a transaction its done snapshot did not see.
std::string HasNewSql(const std::string& message);

// The done snapshot of a position created at the start of the topic: no
// transaction is visible in it.
inline constexpr const char* kStartSnapshot = "1:1:";

}  // namespace compaction::detail
