// A library connection: opening it (startup options, notices), what it
// knows of its server and transaction, and the liveness check the pool
// runs on an idle one.
#pragma once

#include <memory>
#include <string>

#include "compaction/options.hpp"
#include "pg/conninfo.hpp"

struct pg_conn;  // libpq's PGconn

namespace compaction::pg {

class PreparedCache;

struct ConnDeleter {
  void operator()(pg_conn* c) const noexcept;
};
using ConnPtr = std::unique_ptr<pg_conn, ConnDeleter>;

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
  std::string started;            // pg_postmaster_start_time(), epoch text
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
  // An owned transaction's session (Client::Begin): BEGIN is not sent on
  // its own but rides in the pipeline of the transaction's first statement,
  // which saves a round trip per transaction (needs_begin).
  bool begins_transaction = false;

  bool open() const;
  bool in_pipeline() const;
  TransactionStatus transaction_status() const;
  // The next statement starts a transaction that must get the local
  // settings first.
  bool needs_local_settings() const;
  // The transaction this session stands for has not begun on the server:
  // the next statement goes out behind kBeginTransaction (Exec,
  // ExecPipelined and ExecScript add it), and a COMMIT now has nothing to
  // commit.
  bool needs_begin() const;
};

// What Client::Begin's transactions start with: the lock loop is defined
// for READ COMMITTED only, whatever the server's or role's default.
inline constexpr const char* kBeginTransaction =
    "BEGIN ISOLATION LEVEL READ COMMITTED";

// Whether the session's default_transaction_isolation is READ COMMITTED
// (false when it cannot tell). One round trip.
bool DefaultIsReadCommitted(pg_conn* conn);
// False when an idle connection is known to be dead: the server closed it
// or sent an error (a terminated backend, a server shut down) while it was
// idle. Reads what is pending without waiting.
bool LooksAlive(pg_conn* conn);

// Opens a connection with ForConnection(params, settings) and
// `application_name`, its notices routed to `notices` (RouteNotices), its
// startup options handled as `startup` says. Throws ConnectionLost when it
// cannot.
ConnPtr Connect(const ConnParams& params, const SessionSettings& settings,
                const std::string& application_name, const char* operation,
                const NoticeHandler* notices = nullptr,
                StartupOptions startup = StartupOptions::kSend);

// Sends the notices and warnings `conn` receives to `*handler` (dropped when
// `handler` is null or empty) instead of libpq's default, which prints them
// on the application's stderr. `handler` must outlive the connection.
void RouteNotices(pg_conn* conn, const NoticeHandler* handler);

}  // namespace compaction::pg
