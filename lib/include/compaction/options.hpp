// Plain option and result structs shared by the public API.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>

namespace compaction {

// A notice, warning or asynchronous error that the server (or libpq itself)
// sent on one of the library's connections outside any statement's result,
// e.g. "terminating connection due to administrator command" when a server
// shuts down or a failover kills the backend.
struct Notice {
  std::string severity;  // not localized: "WARNING", "NOTICE", "FATAL", ...
  std::string sqlstate;  // five characters; empty when libpq made it
  std::string message;   // the primary message only (no DETAIL: it can
                         // quote key values)
};

// Receives notices. Runs on the thread that uses the connection at that
// moment, so on several threads at once: it must be thread-safe, should be
// quick, and must not call back into the library. Exceptions it throws are
// dropped.
using NoticeHandler = std::function<void(const Notice&)>;

struct ClientOptions {
  // Schema holding every table; always quoted as an identifier.
  std::string schema = "compaction";
  // Connections the client opens at most (plain reads, produces, Begin).
  int pool_size = 4;
  // Shown in pg_stat_activity.application_name.
  std::string application_name = "libcompaction";
  // How long an operation waits for a free pooled connection before it
  // throws PoolTimeout (instead of waiting forever, e.g. when one thread
  // holds every connection in open transactions).
  std::chrono::milliseconds acquire_timeout = std::chrono::seconds(30);
  // true: connected directly or through a session pooler; false: behind a
  // transaction or statement pooler (PgBouncer pool_mode = transaction).
  // With true each pooled connection prepares the statements it runs, under
  // names unique to that connection instance; with false every statement
  // is sent unnamed (extended protocol, still pipelined inside a
  // transaction), since the next transaction may land on a server
  // connection where the statement was never prepared, and no startup
  // `options` are sent (session_settings says what happens to them).
  bool prepared_statements = true;
  // Server settings every session of the client runs with, name -> value
  // as SET takes them, e.g. {{"statement_timeout", "5s"}}. With
  // prepared_statements they go in the startup `options` (`-c name=value`,
  // white space and backslashes escaped); without, where a transaction
  // pooler refuses or drops startup options, each transaction and
  // autocommit statement applies them first with set_config(...,
  // is_local => true), in the same round trip. The conninfo's own `options`
  // (or PGOPTIONS when it sets none) are applied the same way, before these:
  // a name set in both takes the value given here. Without
  // prepared_statements those options may hold only -c / --name=value
  // settings. Names are letters, digits, '_' and '.'; values hold no NUL
  // byte; search_path, default_transaction_isolation and client_encoding
  // are the library's own (pinned on every connection). Anything else is
  // InvalidArgument at Connect, naming the setting, before it connects; an
  // unknown name or a bad value the server refuses when Connect opens its
  // first connection.
  std::map<std::string, std::string> session_settings = {};
  // How long a COMMIT (Tx::Commit, or an autocommit Produce) whose
  // connection broke may spend finding out on a new connection whether it
  // committed: returns normally when it did, throws ConnectionLost when it
  // provably did not, CommitOutcomeUnknown when it cannot tell in time.
  // With a multi-host conninfo this covers the wait for a promoted
  // standby. Zero: no check, every such COMMIT is CommitOutcomeUnknown,
  // and a committing produce gets its answer in one packet instead of two
  // (its result first, to look for), which often saves the client a
  // wake-up (doc/poolers-and-failover.md).
  std::chrono::milliseconds commit_check_timeout = std::chrono::seconds(15);
  // Where the server's notices and warnings on the client's connections
  // go; empty (the default) drops them. libpq would print them on stderr.
  NoticeHandler notice_handler = nullptr;
};

// The longest TTL a topic or a janitor claim takes: 36,500 days (about 100
// years), far beyond any real use and far within what timestamps and
// timers hold. The database's CHECK on the topic table says the same.
inline constexpr std::chrono::milliseconds kMaxTtl =
    std::chrono::hours(24 * 36500);

// The longest server-side timeout (LockOptions::lock_timeout,
// SweepOptions::statement_timeout): PostgreSQL's limit, INT_MAX
// milliseconds (about 24.8 days).
inline constexpr std::chrono::milliseconds kMaxServerTimeout{2147483647};

// A retention that keeps messages forever (the log only grows, as before
// log compaction existed). Stored as the largest bigint.
inline constexpr std::chrono::milliseconds kKeepForever =
    std::chrono::milliseconds::max();

// What Register sets. Every field is optional: unset, a new topic gets the
// default and an existing topic keeps its current value, so an application
// calling Register() at every start never resets what an operator set; a
// set field that differs updates the topic, as the owner role only
// (doc/roles.md).
struct TopicConfig {
  // How long a headless (lock-only) row may stay untouched before the
  // janitor may delete it. Positive and at most kMaxTtl; default 1 h.
  std::optional<std::chrono::milliseconds> headless_ttl;
  // How long a message that is not its key's current head is kept (by its
  // created_at, on the server's clock) before the log cleaner may delete
  // it: superseded versions, versions that lost on arrival, messages
  // produced without compaction or without a key. A head is never removed
  // by retention. 0 (removed at the cleaner's next pass) to kMaxTtl, or
  // kKeepForever; default 7 days.
  std::optional<std::chrono::milliseconds> retention;
  // How long a tombstone that is its key's head is kept; then the cleaner
  // deletes it and the key's row turns headless. Same bounds; default 1 day.
  std::optional<std::chrono::milliseconds> tombstone_retention;
  // How many partitions consumers split the topic in (a key's messages
  // always land in one; instances of a consumer share the partitions).
  // 1..kMaxPartitions, default 1, fixed when the topic is created: a
  // different value for an existing topic is InvalidArgument.
  std::optional<int> partitions;
  // A consumer whose last Poll is older than this is inactive: reported as
  // such, and the log cleaner no longer keeps tombstones or messages out of
  // retention for it. Positive and at most kMaxTtl; default 7 days.
  std::optional<std::chrono::milliseconds> consumer_inactive_after;
};

inline constexpr int kMaxPartitions = 1024;

struct TopicInfo {
  std::int64_t id = 0;
  std::string name;
  std::chrono::milliseconds headless_ttl{0};
  std::chrono::milliseconds retention{0};
  std::chrono::milliseconds tombstone_retention{0};
  int partitions = 1;
  std::chrono::milliseconds consumer_inactive_after{0};
};

struct ListOptions {
  // Return heads with message_key strictly greater than this, by bytes
  // (paging).
  std::string after_key;
  // Page size, 1..10000.
  int limit = 100;
};

struct LockOptions {
  // Bounds how long LockCompactionHead waits for the key's row lock. On
  // expiry it throws LockTimeout and the caller's transaction stays usable.
  std::optional<std::chrono::milliseconds> lock_timeout;
};

class Error;

// KeyHandle::Update.
struct UpdateOptions {
  // Transactions tried at most, 1..100: the first one and the retries of
  // what is safe to retry (RetryableError, ConnectionLost before COMMIT
  // was known not to commit). Never CommitOutcomeUnknown: that transaction
  // may have committed.
  int attempts = 3;
  LockOptions lock;
  // The new value's compaction rank. Unset: the locked head's rank (0 for
  // a key without one), so the new value wins whenever its schema_version
  // is at least the head's.
  std::optional<std::int64_t> rank;
  // Called before each retry with the error that ended the attempt and
  // that attempt's number (1-based): count, log or back off here. Runs on
  // the calling thread; an exception from it ends the Update.
  std::function<void(const Error& error, int attempt)> on_retry;
};

}  // namespace compaction
