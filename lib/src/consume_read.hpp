// The batch read of a consumer's partition (consume_read.cpp) and the SQL
// snippets Poll and Wait share.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
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

// Who reads, for ReadBatch's errors: named only when one is thrown, since
// every Poll passes one.
struct Reader {
  const char* operation;  // "Poll", "TopicTail"
  std::string_view topic;
  // Empty for a TopicTail, whose position lives in its memory, not stored.
  std::string_view consumer;

  bool position_stored() const { return !consumer.empty(); }
  // "consumer 'c' of topic 't'", "the tail of topic 't'"
  std::string Name() const;
};

// Reads up to `limit` deliveries of `partition` after `position` and moves
// `position` past them (in memory only; not at all when a read throws).
// Opens a new window when the current one runs out, at most once, so an
// empty result means nothing new. Throws DatabaseError (kTransactionIdsAhead,
// naming the reader) when the position, or a message of the partition, is
// ahead of this server's transaction ids (consume_read.cpp CheckNotAhead).
std::vector<RawDelivery> ReadBatch(ClientCore& core, pg::Session s,
                                   const Reader& reader, std::int64_t topic_id,
                                   int partition, bool heads_only, int limit,
                                   Position& position);

// SQL true when the consumer position aliased `p` may have messages to
// read in message table `message`: a window is open, or a message of its
// partition was committed by a transaction its done snapshot did not see.
std::string HasNewSql(const std::string& message);

// The snapshot a new window (or a reset to the end) takes: the current one,
// with the reading transaction's own id, when it has one, counted as in
// progress. PostgreSQL leaves a transaction's own id out of its snapshots'
// in-progress lists, so once any later id has ended, the plain snapshot
// counts the reader itself as ended. Stored as consumed, it would hide for
// good what the transaction produces after its Poll (its position lock
// gives it an id), and deliver what it produced before as if committed.
inline constexpr const char* kWindowSnapshotSql =
    "(SELECT CASE WHEN c.x IS NULL OR c.x >= "
    "pg_catalog.pg_snapshot_xmax(c.s) THEN c.s ELSE pg_catalog.concat("
    "LEAST(pg_catalog.pg_snapshot_xmin(c.s), c.x), ':', "
    "pg_catalog.pg_snapshot_xmax(c.s), ':', (SELECT "
    "pg_catalog.string_agg(v.xid::text, ',' ORDER BY v.xid) FROM (SELECT "
    "pg_catalog.pg_snapshot_xip(c.s) UNION SELECT c.x) v (xid)))::"
    "pg_catalog.pg_snapshot END FROM (SELECT pg_catalog.pg_current_snapshot() "
    "AS s, pg_catalog.pg_current_xact_id_if_assigned() AS x) c)";

// The done snapshot of a position created at the start of the topic: no
// transaction is visible in it.
inline constexpr const char* kStartSnapshot = "1:1:";

}  // namespace compaction::detail
