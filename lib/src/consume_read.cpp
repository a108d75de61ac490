// The batch read of a consumer: what a newer snapshot sees that the
// consumer's last one did not.
//
// Why it is correct.
//
// Message ids are drawn at INSERT and transactions commit in any order, so
// "every id above the last one delivered" loses a message whose transaction
// drew id 8, stayed open while id 9 was committed and delivered, then
// committed. Instead every message stores its writing transaction's
// top-level id (message.xid, a column default of pg_current_xact_id()), and
// a partition's position is a snapshot D: every message whose transaction
// is visible in D has been consumed. A batch is read under a newer snapshot
// W: the messages with pg_visible_in_snapshot(xid, W) and not
// pg_visible_in_snapshot(xid, D). A transaction visible in W has ended, so
// the set is final: nothing can join it later, and whatever commits after
// W is not visible in W and comes with a later window. Taking D := W once
// the set is exhausted therefore never skips a message and never repeats
// one, whatever the commit order; a rolled-back writer's rows are never
// visible to the reading statement, so they are never delivered.
//
// The reading statement needs to see every row visible in W: W is either
// its own snapshot (pg_current_snapshot() in READ COMMITTED is the
// statement's) or one taken by an earlier statement, and a later snapshot
// sees every transaction an earlier one saw as committed. The reader's own
// transaction counts as in progress in W (kWindowSnapshotSql): what it
// writes, before or after the Poll, comes with a window after it commits.
//
// How it stays proportional to the batch. Not visible in D means xid >=
// xmax(D), or xid in D's in-progress list xip(D) (everything else below
// xmax(D) was visible in D, or never committed). So the read is two index
// scans of (partition, xid, id): a range from xmax(D) up to xmax(W), and a
// lookup by value of each xid of xip(D) that W sees (PgQ's care for a long
// transaction: D's xmin may lag far behind, but the range starts at
// xmax(D), so what the long transaction held back is never rescanned).
// Both are walked in (xid, id) order from a cursor, the last message
// delivered, and merged; a Poll stops after batch_size rows. The window W
// stays fixed across Polls until it is exhausted, so a catch-up from the
// start of a large topic (D = "1:1:", nothing visible) walks the index once,
// a batch at a time, and never sorts the whole window. In the tail a window
// holds what committed since the last one. Rows of transactions still in
// progress in W are skipped by the range scan (not visible in W), and a
// window is crossed once, so they cost at most one pass per window.
//
// Other instances: a position row is locked FOR UPDATE by the Poll's
// transaction (lib/src/consume.cpp), and read after the lock is granted,
// under a snapshot taken after the previous holder committed; so D, W and
// the cursor it reads are the latest, and two instances never read one
// partition at once.
//
// On Citus the same read runs on the partition's shard with W taken on the
// coordinator (whose transaction ids every message stores), after a look
// on the shard for prepared two-phase parts that W may already count as
// ended; doc/citus.md ("Consumers on Citus") gives the orderings.
#include "consume_read.hpp"

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>

#include "compaction/errors.hpp"
#include "rows.hpp"

namespace compaction::detail {
namespace {

// The message and its head flag; xid last, for the cursor.
std::string Columns(const std::string& alias) {
  return alias + ".id, " + alias + ".message_key, " + alias +
         ".schema_version, " + alias + ".compaction_rank, " + alias +
         ".created_at, " + alias + ".payload, " + alias + ".xid";
}

// True when message `m` is its key's head (the reading statement's view).
// On Citus the head row is matched on its partition too, so that the
// lookup stays on the message's shard.
std::string IsHeadSql(const ClientCore& core, std::int64_t topic_id,
                      const std::string& m) {
  return "EXISTS (SELECT 1 FROM " + core.HeadTable(topic_id) +
         " h WHERE h.message_key = " + m + ".message_key AND h.head_id = " + m +
         ".id" + (core.citus() ? " AND h.partition = $1::integer" : "") + ")";
}

// $1 partition, $2 D, $3 W (NULL: this statement's snapshot), $4/$5 the
// cursor (xid, id), $6 the most rows, $7/$8 where the range scan starts
// (RangeStart). The first column of the one row that is always returned is
// W; a row without a message means none was found. The last two columns
// serve CheckNotAhead: this statement's snapshot xmax, and for a new
// window the largest xid of a message of the partition at or above it,
// which no visible row written by this cluster has (its writer ended
// before this statement's snapshot), but for one of the reader's own. On
// Citus both are NULL: the statement runs on the shard, whose snapshot is
// not the coordinator's.
std::string ReadSql(const ClientCore& core, std::int64_t topic_id,
                    bool heads_only) {
  const std::string message = core.MessageTable(topic_id);
  const std::string heads =
      heads_only ? " AND " + IsHeadSql(core, topic_id, "m") : "";
  const std::string after = "(m.xid, m.id) > ($4::xid8, $5::bigint)";
  const std::string w = "(SELECT s FROM w)";
  const std::string d = "(SELECT s FROM d)";
  return "/* compaction:Poll:read */ WITH w AS MATERIALIZED (SELECT "
         "coalesce($3::pg_snapshot, " +
         std::string(kWindowSnapshotSql) +
         ") AS s), "
         "d AS MATERIALIZED (SELECT $2::pg_snapshot AS s), "
         "ahead AS MATERIALIZED (" +
         (core.citus() ? std::string("SELECT NULL::text AS here, NULL::text "
                                     "AS copied")
                       : "SELECT pg_catalog.pg_snapshot_xmax("
                         "pg_catalog.pg_current_snapshot())::text AS here, "
                         "CASE WHEN $3::pg_snapshot IS NULL THEN (SELECT "
                         "pg_catalog.max(m.xid) FROM " +
                             message +
                             " m WHERE m.partition = $1::integer AND m.xid "
                             ">= pg_catalog.pg_snapshot_xmax(" +
                             w +
                             ") AND m.xid IS DISTINCT FROM "
                             "pg_catalog.pg_current_xact_id_if_assigned())::"
                             "text END AS copied") +
         ") "
         "SELECT (SELECT s::text FROM w), b.id, b.message_key, "
         "b.schema_version, b.compaction_rank, " +
         Micros("b.created_at") + ", b.payload::text, b.xid::text, " +
         // Only a keyed compacted message can be a head: no lookup for the
         // others.
         "b.compaction_rank IS NOT NULL AND b.message_key IS NOT NULL AND " +
         IsHeadSql(core, topic_id, "b") +
         ", ahead.here, ahead.copied FROM (SELECT) one LEFT JOIN LATERAL "
         "(SELECT u.* FROM (("
         "SELECT " +
         Columns("m") + " FROM " + message +
         " m WHERE m.partition = $1::integer "
         "AND (m.xid, m.id) > ($7::xid8, $8::bigint) "
         "AND m.xid < pg_catalog.pg_snapshot_xmax(" +
         w + ") AND pg_catalog.pg_visible_in_snapshot(m.xid, " + w + ")" +
         heads +
         " ORDER BY m.xid, m.id LIMIT $6::bigint) UNION ALL (SELECT l.* FROM "
         "pg_catalog.pg_snapshot_xip(" +
         d + ") x (xid) CROSS JOIN LATERAL (SELECT " + Columns("m") + " FROM " +
         message + " m WHERE m.partition = $1::integer AND m.xid = x.xid AND " +
         after + heads +
         " ORDER BY m.id LIMIT $6::bigint) l "
         "WHERE x.xid >= $4::xid8 "
         "AND pg_catalog.pg_visible_in_snapshot(x.xid, " +
         w +
         "))) u ORDER BY u.xid, u.id LIMIT $6::bigint) b ON true "
         "CROSS JOIN ahead ORDER BY b.xid, b.id";
}

struct Window {
  std::string snapshot;  // W as read
  bool held = false;     // Citus: not opened, a prepared writer on the shard
  // The server's snapshot xmax as this read saw it (unknown: on Citus, in
  // a window opened earlier), and a message's xid at or above it.
  std::optional<std::uint64_t> here;
  std::optional<std::string> copied_xid;
  std::vector<RawDelivery> rows;
  std::optional<std::string> last_xid;
};

// xmax of a snapshot's text form, "xmin:xmax:xip,...".
std::uint64_t SnapshotXmax(const std::string& snapshot) {
  const size_t from = snapshot.find(':') + 1;
  return std::stoull(snapshot.substr(from, snapshot.find(':', from) - from));
}

// Where the range scan of xids from xmax(D) starts: after the cursor, or
// at xmax(D) when the cursor lies below it (none yet, or a message of D's
// in-progress list). One bound, as the index scan's start key: given both
// `xid >= xmax(D)` and `(xid, id) > cursor`, PostgreSQL may start the scan
// at the row comparison and walk the partition's whole index from its
// beginning (every tail Poll read the whole log). Ids start at 1, so
// (xid, id) > (xmax(D), 0) means xid >= xmax(D).
std::pair<std::string, std::int64_t> RangeStart(const Position& at) {
  const std::string xmax = std::to_string(SnapshotXmax(at.done));
  if (at.cursor_xid && std::stoull(*at.cursor_xid) >= std::stoull(xmax)) {
    return {*at.cursor_xid, at.cursor_id.value_or(0)};
  }
  return {xmax, 0};
}

// On Citus, the coordinator's snapshot for a new window W and the name of
// the partition's shard of the message table, in one statement.
std::pair<std::string, std::string> CitusWindow(ClientCore& core, pg::Session s,
                                                std::int64_t topic_id,
                                                int partition) {
  pg::Result r = pg::Exec(
      s, "Poll",
      std::string("/* compaction:Poll:window */ SELECT ") + kWindowSnapshotSql +
          "::text, pg_catalog.shard_name("
          "$1::regclass, pg_catalog.get_shard_id_for_distribution_column("
          "$1::regclass, $2::integer))::text",
      pg::Params().Add(core.MessageTable(topic_id)).Add(partition));
  return {std::string(pg::Text(r, 0, 0)), std::string(pg::Text(r, 0, 1))};
}

// On Citus, whether a prepared transaction (the worker's part of a
// two-phase commit; pg_locks shows its locks with no pid) holds a lock on
// the partition's shard. One statement routed to the shard's worker (the
// LIMIT 0 lookup of the message table is what routes it); it must run
// after W is taken and before the statement whose snapshot reads the
// window (doc/citus.md, "Consumers on Citus").
bool PreparedOnShard(ClientCore& core, pg::Session s, std::int64_t topic_id,
                     int partition, const std::string& shard) {
  pg::Result r = pg::Exec(
      s, "Poll",
      "/* compaction:Poll:prepared */ SELECT EXISTS (SELECT 1 FROM "
      "pg_catalog.pg_locks l WHERE l.relation = pg_catalog.to_regclass("
      "$2::text) AND l.pid IS NULL) FROM (SELECT) one "
      "LEFT JOIN LATERAL (SELECT 1 FROM " +
          core.MessageTable(topic_id) +
          " m WHERE m.partition = $1::integer LIMIT 0) x ON true",
      pg::Params().Add(partition).Add(shard));
  return pg::Bool(r, 0, 0);
}

Window ReadWindow(ClientCore& core, pg::Session s, std::int64_t topic_id,
                  int partition, bool heads_only, int limit, Position at) {
  constexpr const char* kOp = "Poll";
  std::optional<std::uint64_t> here;
  if (core.citus() && !at.read) {
    // W is the coordinator's: every stored xid is (doc/citus.md). A
    // two-phase writer visible in W may still be prepared on the shard:
    // then the window is not opened and the position stays where it is.
    auto [w, shard] = CitusWindow(core, s, topic_id, partition);
    if (PreparedOnShard(core, s, topic_id, partition, shard)) {
      Window held;
      held.snapshot = at.done;
      held.held = true;
      return held;
    }
    here = SnapshotXmax(w);
    at.read = std::move(w);
  }
  const std::pair<std::string, std::int64_t> start = RangeStart(at);
  pg::Result r = pg::Exec(s, kOp, ReadSql(core, topic_id, heads_only),
                          pg::Params()
                              .Add(partition)
                              .Add(at.done)
                              .Add(at.read)
                              .Add(at.cursor_xid.value_or("0"))
                              .Add(at.cursor_id.value_or(0))
                              .Add(limit)
                              .Add(start.first)
                              .Add(start.second));
  Window out;
  out.snapshot = std::string(pg::Text(r, 0, 0));
  out.here = pg::IsNull(r, 0, 9) ? here
                                 : std::optional<std::uint64_t>(std::stoull(
                                       std::string(pg::Text(r, 0, 9))));
  if (!pg::IsNull(r, 0, 10)) out.copied_xid = std::string(pg::Text(r, 0, 10));
  const int n = r.rows();
  for (int row = 0; row < n; ++row) {
    if (pg::IsNull(r, row, 1)) break;  // the empty window's one row
    RawDelivery d;
    // Raw payloads: decoding (and its typed errors) is the template's.
    d.stored.id = pg::Int64(r, row, 1);
    d.stored.message_key = std::string(pg::Text(r, row, 2));
    d.stored.schema_version = static_cast<int>(pg::Int64(r, row, 3));
    d.stored.compaction_rank = pg::OptInt64(r, row, 4);
    d.stored.created_at = FromMicros(pg::Int64(r, row, 5));
    d.stored.message.schema_version = d.stored.schema_version;
    if (pg::IsNull(r, row, 6)) {
      d.stored.message.tombstone = true;
    } else {
      // As every other read (rows.hpp ParseStored): a number beyond double
      // range reads as +-infinity with the exact digits in payload_text,
      // and an error quotes none of the payload.
      const std::string_view text = pg::Text(r, row, 6);
      d.stored.message.payload =
          ParseStoredPayload(kOp, d.stored.id, text.data(), text.size());
      d.stored.message.payload_text.assign(text);
    }
    out.last_xid = std::string(pg::Text(r, row, 7));
    d.head = pg::Bool(r, row, 8);
    out.rows.push_back(std::move(d));
  }
  return out;
}

// The largest transaction id a position names: its done and read
// snapshots' xmax and its cursor.
std::uint64_t Newest(const Position& at) {
  std::uint64_t newest = SnapshotXmax(at.done);
  if (at.read) newest = std::max(newest, SnapshotXmax(*at.read));
  if (at.cursor_xid) {
    newest = std::max<std::uint64_t>(newest, std::stoull(*at.cursor_xid));
  }
  return newest;
}

// Every position stored in this cluster names ids below the xmax of any
// snapshot taken since, which never goes back; and no visible message has
// an xid at or above it (ReadSql). Either seen otherwise came from another
// cluster through a logical copy, where its ids mean nothing: reading on
// would count this cluster's new messages as consumed, or never reach the
// copied ones. A TopicTail's position lives in its memory instead, so a
// server that lost its newest transactions (a failover to a standby that
// lags, a crash before aborts reached the disk) is behind it too. The
// message look is one more range of the (partition, xid, id) index per new
// window, from W's xmax up: empty in a healthy cluster but for the rows of
// writers still in progress, which the window's own range scan passes once
// a window too. On Citus the position is checked as a window opens (W is
// the coordinator's), the messages not at all.
void CheckNotAhead(const Reader& reader, int partition, const Position& at,
                   const Window& w) {
  const bool position_ahead = w.here && Newest(at) > *w.here;
  if (!position_ahead && !w.copied_xid) return;  // the every-read case
  const std::string where =
      reader.Name() + ", partition " + std::to_string(partition) + ": ";
  const std::string here =
      w.here ? std::to_string(*w.here) : std::string("unknown");
  const std::string copied =
      "the database was copied from another cluster (a logical dump or "
      "logical replication), whose transaction ids mean nothing here. "
      "Nothing was read and no position moved";
  const std::string see = " (doc/operations.md, \"Moving a database\")";
  const auto refusal = [&](const std::string& what) {
    return DatabaseError(reader.operation, std::string(kTransactionIdsAhead),
                         where + what);
  };
  if (position_ahead) {
    if (!reader.position_stored()) {
      throw refusal(
          "this server's transaction ids (snapshot xmax " + here +
          ") are behind the tail's position (" + std::to_string(Newest(at)) +
          "): it failed over to a standby that lags, restarted after "
          "a crash, or holds a copy of another cluster's database. Start "
          "the tail again" +
          see);
    }
    throw refusal(
        "its position names transaction id " + std::to_string(Newest(at)) +
        ", past this server's snapshot xmax " + here + ": " + copied +
        "; messages produced here since the copy look consumed to it, "
        "so stop producers first" +
        see);
  }
  throw refusal("its log holds a message of transaction id " + *w.copied_xid +
                ", at or past this server's snapshot xmax " + here + ": " +
                copied + see);
}

}  // namespace

std::string Reader::Name() const {
  const std::string of_topic = "topic '" + std::string(topic) + "'";
  if (!position_stored()) return "the tail of " + of_topic;
  return "consumer '" + std::string(consumer) + "' of " + of_topic;
}

std::vector<RawDelivery> ReadBatch(ClientCore& core, pg::Session s,
                                   const Reader& reader, std::int64_t topic_id,
                                   int partition, bool heads_only, int limit,
                                   Position& position) {
  std::vector<RawDelivery> out;
  // Moved on a copy, written back once every read succeeded: a TopicTail
  // keeps its position in memory, and a second read that throws after the
  // first finished its window must not leave the first one's rows behind.
  Position at = position;
  // A window left open by an earlier Poll, then (when it runs out before
  // the batch is full) one new window. A new window that is not full is
  // everything committed: stop there.
  for (int round = 0; round < 2 && static_cast<int>(out.size()) < limit;
       ++round) {
    const bool fresh = !at.read.has_value();
    const int want = limit - static_cast<int>(out.size());
    Window w = ReadWindow(core, s, topic_id, partition, heads_only, want, at);
    if (!w.held) CheckNotAhead(reader, partition, at, w);
    const bool full = static_cast<int>(w.rows.size()) == want;
    if (full) {
      at.read = w.snapshot;
      at.cursor_xid = w.last_xid;
      at.cursor_id = w.rows.back().stored.id;
    } else {
      at.done = w.snapshot;
      at.read.reset();
      at.cursor_xid.reset();
      at.cursor_id.reset();
    }
    for (RawDelivery& d : w.rows) out.push_back(std::move(d));
    if (full || fresh || w.held) break;
  }
  position = std::move(at);
  return out;
}

std::string HasNewSql(const std::string& message) {
  return "(p.read_snapshot IS NOT NULL OR EXISTS (SELECT 1 FROM " + message +
         " m WHERE m.partition = p.partition AND m.xid >= "
         "pg_catalog.pg_snapshot_xmax(p.done_snapshot)) OR EXISTS (SELECT 1 "
         "FROM " +
         message +
         " m WHERE m.partition = p.partition AND m.xid = ANY (ARRAY(SELECT "
         "pg_catalog.pg_snapshot_xip(p.done_snapshot)))))";
}

}  // namespace compaction::detail
