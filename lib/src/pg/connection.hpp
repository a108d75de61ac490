// RAII over libpq: connections, cancel handles and the one Exec helper that
// checks the status of every statement and throws the mapped
// compaction::Error. This directory is the only code that includes libpq:
// elsewhere a connection is an opaque pg_conn* handed to these functions and
// results are read through pg::Result.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "compaction/options.hpp"
#include "pg/conninfo.hpp"
#include "pg/result.hpp"

struct pg_conn;    // libpq's PGconn
struct pg_cancel;  // libpq's PGcancel

namespace compaction::pg {

struct ConnDeleter {
  void operator()(pg_conn* c) const noexcept;
};
using ConnPtr = std::unique_ptr<pg_conn, ConnDeleter>;

// Text-format statement parameters; nullopt is SQL NULL.
class Params {
 public:
  Params& Add(std::string value) {
    values_.emplace_back(std::move(value));
    return *this;
  }
  Params& Add(std::int64_t value) { return Add(std::to_string(value)); }
  Params& Add(int value) { return Add(std::to_string(value)); }
  Params& AddNull() {
    values_.emplace_back(std::nullopt);
    return *this;
  }
  template <class T>
  Params& Add(const std::optional<T>& value) {
    return value ? Add(*value) : AddNull();
  }
  int size() const { return static_cast<int>(values_.size()); }
  std::vector<const char*> Pointers() const;

 private:
  std::vector<std::optional<std::string>> values_;
};

// Per-connection cache of prepared statements, keyed by SQL text. Not
// thread-safe: it belongs to one connection.
// "c<16 hex digits>_": a statement-name prefix no other cache shares.
std::string RandomStatementPrefix();

class PreparedCache {
 public:
  // Returns the statement name for `sql`, preparing it on first use.
  const std::string& Prepare(pg_conn* conn, const char* operation,
                             const std::string& sql, int n_params);
  void Clear() {
    names_.clear();
    ++generation_;
  }
  // Changes whenever the cache starts over (DEALLOCATE ALL): names handed
  // out before are then gone on the server too.
  std::uint64_t generation() const { return generation_; }

  // Statements kept per connection before the cache starts over.
  static constexpr std::size_t kMaxPrepared = 512;

 private:
  std::unordered_map<std::string, std::string> names_;
  // Random per cache, so per connection instance: behind a pooler that
  // mixes sessions, a name prepared by another client (or by another of
  // ours) is "does not exist", never someone else's statement.
  const std::string prefix_ = RandomStatementPrefix();
  std::uint64_t next_ = 0;
  std::uint64_t generation_ = 0;
};

// What libpq knows of a connection's transaction.
enum class TransactionStatus {
  kIdle,           // outside any transaction block
  kActive,         // a statement is in progress
  kInTransaction,  // idle inside a transaction block
  kInError,        // idle inside a failed transaction block
  kUnknown,        // the connection is bad
};

// Which server and backend a connection talks to, read once when it opens:
// what a COMMIT whose connection broke is checked against
// (commit_outcome.cpp). Unknown when the server refused to say, or when
// the backend that answered is not the one libpq connected to (a pooler in
// between: then no backend pid of ours can be watched).
struct ServerIdentity {
  std::string system_identifier;  // pg_control_system(); empty: unknown
  std::string started;            // pg_postmaster_start_time(), in us
  int backend_pid = 0;
  bool known() const { return !system_identifier.empty(); }
  bool SameServer(const ServerIdentity& other) const {
    return known() && other.known() &&
           system_identifier == other.system_identifier &&
           started == other.started;
  }
};
// Reads `conn`'s identity. Throws ConnectionLost when the connection
// breaks; any other failure leaves it unknown.
ServerIdentity ReadServerIdentity(pg_conn* conn, const char* operation);

// A connection plus the statement cache that belongs to it; the cache is
// null for a borrowed connection, whose session state is not ours.
struct Session {
  pg_conn* conn = nullptr;
  PreparedCache* cache = nullptr;
  // SQL setting the connection's startup settings for the current
  // transaction only (LocalSettingsSql), or null/empty. Exec, ExecPipelined
  // and ExecScript run it, in the same round trip, ahead of a statement that
  // starts a transaction; so it holds behind a transaction pooler, which
  // refuses or drops startup `options`.
  const std::string* local_settings = nullptr;
  // Null for a borrowed connection.
  const ServerIdentity* server = nullptr;
  // The server's default_transaction_isolation was READ COMMITTED when the
  // connection opened (DefaultIsReadCommitted): an autocommit statement
  // may then run as an implicit transaction (ExecCommitted).
  bool read_committed_default = false;

  bool open() const;
  bool in_pipeline() const;
  TransactionStatus transaction_status() const;
};

// A cancel request for one connection's running statement (PQgetCancel),
// valid while that connection lives; Send() may run on any thread.
class CancelHandle {
 public:
  explicit CancelHandle(pg_conn* conn);
  // Asks the server to cancel whatever the connection runs now (an idle
  // backend ignores it). Blocks on the network; never throws: a failed
  // request leaves the statement running, as if it came too late.
  void Send() const noexcept;

 private:
  struct Free {
    void operator()(pg_cancel* c) const noexcept;
  };
  std::unique_ptr<pg_cancel, Free> cancel_;  // null when PQgetCancel failed
};

// Runs one parameterized statement; throws the mapped error unless it
// returned rows or completed.
Result Exec(Session session, const char* operation, const std::string& sql,
            const Params& params = {});
// The same, but returns whatever result came back (null when libpq could
// not send it) for the caller to judge; throws only when preparing failed,
// and then the statement was never sent.
Result ExecUnchecked(Session session, const char* operation,
                     const std::string& sql, const Params& params = {});
// One statement of a pipeline.
struct Statement {
  std::string sql;
  Params params;
};
// Runs the statements in order in one round trip (libpq pipeline mode) and
// returns their results. When one fails the server skips the rest; the
// first error is thrown after the pipeline is drained, and inside a
// transaction block it aborts the transaction like any failed statement.
std::vector<Result> ExecPipelined(Session session, const char* operation,
                                  const std::vector<Statement>& statements);
// What ExecCommitted saw of a statement run in a transaction of its own.
struct CommittedExec {
  Result rows;            // the statement's result; null: never came back
  bool in_doubt = false;  // the connection broke after the statement was
                          // sent and before COMMIT answered: it may have
                          // committed
};
// Runs `statement` in a READ COMMITTED transaction of its own, in one round
// trip: the statement, a flush request and a sync (an implicit transaction
// the server commits at the sync; BEGIN and COMMIT around them instead
// behind a transaction pooler, with local settings, or where the session's
// default isolation is another). The server sends the statement's result
// before it commits, so a caller whose COMMIT breaks usually holds what the
// statement returned (RETURNING) to look for. Throws the statement's (or
// COMMIT's) error when the server refused it (nothing committed; the
// connection is left idle), and ConnectionLost when the connection was
// already broken (nothing sent).
CommittedExec ExecCommitted(Session session, const char* operation,
                            const Statement& statement);
// Whether the session's default_transaction_isolation is READ COMMITTED
// (false when it cannot tell). One round trip.
bool DefaultIsReadCommitted(pg_conn* conn);
// False when an idle connection is known to be dead: the server closed it
// or sent an error (a terminated backend, a server shut down) while it was
// idle. Reads what is pending without waiting.
bool LooksAlive(pg_conn* conn);
// Runs a parameterless script (several statements) with the simple query
// protocol; returns the last result.
Result ExecScript(pg_conn* conn, const char* operation, const std::string& sql);
// The same, with the session's local settings prepended when the script
// starts a transaction (a multi-statement query is one transaction, and a
// BEGIN in it takes the statements before it in).
Result ExecScript(Session session, const char* operation,
                  const std::string& sql);

// COMMIT, whose errors go through the one mapper (ThrowError). Returns
// false when the server answered with the tag ROLLBACK (the transaction
// had failed). Throws CommitOutcomeUnknown when the connection broke with
// COMMIT sent: it may or may not have committed.
bool Commit(Session session, const char* operation);
// ROLLBACK when the connection is open and inside a transaction block;
// errors are dropped (the caller has news of its own, and a broken
// connection is the pool's to discard).
void RollbackQuietly(Session session);

// The startup options every connection we open gets: search_path pinned,
// and READ COMMITTED for statements outside a transaction block (an
// autocommit Produce is one implicit transaction, ExecCommitted), whatever
// default a role or database sets. Behind a transaction pooler they become
// per-transaction settings (LocalSettingsSql), where the isolation one
// changes nothing: the block there starts with its own isolation level.
inline constexpr const char* kPinnedOptions =
    "-c search_path=pg_catalog,pg_temp "
    "-c default_transaction_isolation=read\\ committed";

// The client_encoding of every library connection but the NOTIFY
// listener's (ForConnection sets it, LocalSettingsSql per transaction).
inline constexpr const char* kClientEncoding = "UTF8";

// `options` (a libpq startup options string) with the pins appended, so
// they win over any search_path or isolation the caller set there.
std::string PinnedOptions(std::string options);

// `params` as every connection the library opens gets them: search_path
// and isolation pinned (kPinnedOptions, appended to their or PGOPTIONS'
// options), and connect_timeout 10 s, TCP keepalives and tcp_user_timeout
// 30 s unless they set them.
ConnParams ForConnection(ConnParams params);

// The `-c name=value` and `--name=value` settings of a libpq startup
// `options` string, in order. Throws InvalidArgument (without quoting the
// string) on anything else, e.g. another postgres switch.
std::vector<std::pair<std::string, std::string>> OptionSettings(
    const std::string& options, const char* operation);

// One statement that applies the startup settings ForConnection(params)
// would send (the search_path pin, the caller's -c settings) with
// set_config(name, value, is_local => true): the same settings, for the
// current transaction only. Throws InvalidArgument like OptionSettings.
std::string LocalSettingsSql(const ConnParams& params, const char* operation);

// How a connection gets the settings of its startup `options`.
enum class StartupOptions {
  kSend,            // in the startup packet, for the whole session
  kPerTransaction,  // not at all: the caller runs LocalSettingsSql in each
                    // transaction (for transaction poolers)
};

// Opens a connection with ForConnection(params) and `application_name`,
// its notices routed to `notices` (RouteNotices), its startup options
// handled as `startup` says. Throws ConnectionLost when it cannot.
ConnPtr Connect(const ConnParams& params, const std::string& application_name,
                const char* operation, const NoticeHandler* notices = nullptr,
                StartupOptions startup = StartupOptions::kSend);

// Sends the notices and warnings `conn` receives to `*handler` (dropped when
// `handler` is null or empty) instead of libpq's default, which prints them
// on the application's stderr. `handler` must outlive the connection.
void RouteNotices(pg_conn* conn, const NoticeHandler* handler);

// The parameter arrays PQconnectdbParams and PQconnectStartParams take;
// valid while `params` lives.
struct ParamArrays {
  explicit ParamArrays(const ConnParams& params);
  std::vector<const char*> keywords;
  std::vector<const char*> values;
};

// libpq's error message of `conn` without the trailing newline.
std::string TrimmedErrorMessage(pg_conn* conn);

// A quoted identifier, e.g. "my schema".
std::string QuoteIdentifier(pg_conn* conn, const std::string& name);
std::string QuoteLiteral(pg_conn* conn, const std::string& value);

// Throws the compaction::Error that a failed result (or a broken
// connection, when `result` is null) maps to. See sqlstate.cpp.
[[noreturn]] void ThrowError(const char* operation, pg_conn* conn,
                             const pg_result* result);
[[noreturn]] inline void ThrowError(const char* operation, pg_conn* conn,
                                    const Result& result) {
  ThrowError(operation, conn, result.get());
}

}  // namespace compaction::pg
