#include "pg/connection.hpp"

#include <libpq-fe.h>
#include <poll.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <random>
#include <utility>

#include "compaction/errors.hpp"
#include "pg/connect_error.hpp"
#include "pg/sqlstate.hpp"

namespace compaction::pg {
namespace {

bool Succeeded(const PGresult* result) {
  if (result == nullptr) return false;
  const ExecStatusType status = PQresultStatus(result);
  return status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK;
}

// True when the next statement on `session` starts a transaction that must
// get the session's local settings first.
bool NeedsLocalSettings(Session session) {
  return session.local_settings != nullptr &&
         !session.local_settings->empty() &&
         PQtransactionStatus(session.conn) == PQTRANS_IDLE &&
         PQpipelineStatus(session.conn) == PQ_PIPELINE_OFF;
}

}  // namespace

std::string TrimmedErrorMessage(PGconn* conn) {
  std::string message = conn ? PQerrorMessage(conn) : "no connection";
  while (!message.empty() &&
         (message.back() == '\n' || message.back() == ' ')) {
    message.pop_back();
  }
  return message.empty() ? "unknown libpq error" : message;
}

std::vector<const char*> Params::Pointers() const {
  std::vector<const char*> out;
  out.reserve(values_.size());
  for (const auto& v : values_) out.push_back(v ? v->c_str() : nullptr);
  return out;
}

std::string RandomStatementPrefix() {
  static thread_local std::mt19937_64 engine{std::random_device{}()};
  char text[20];
  std::snprintf(text, sizeof text, "c%016llx_",
                static_cast<unsigned long long>(engine()));
  return text;
}

const std::string& PreparedCache::Prepare(PGconn* conn, const char* operation,
                                          const std::string& sql,
                                          int n_params) {
  auto it = names_.find(sql);
  if (it != names_.end()) return it->second;
  // Generated SQL differs per topic, so a process that touches thousands
  // of topics would keep thousands of plans per backend: start over.
  if (names_.size() >= kMaxPrepared) {
    Result cleared(PQexec(conn, "DEALLOCATE ALL"));
    if (!Succeeded(cleared.get())) ThrowError(operation, conn, cleared.get());
    Clear();
  }
  std::string name = prefix_ + std::to_string(next_++);
  Result result(PQprepare(conn, name.c_str(), sql.c_str(), n_params, nullptr));
  if (!Succeeded(result.get())) ThrowError(operation, conn, result.get());
  return names_.emplace(sql, std::move(name)).first->second;
}

Result ExecUnchecked(Session session, const char* operation,
                     const std::string& sql, const Params& params) {
  const std::vector<const char*> values = params.Pointers();
  Result result(nullptr, operation);
  if (session.cache != nullptr) {
    const std::string& name =
        session.cache->Prepare(session.conn, operation, sql, params.size());
    result.reset(PQexecPrepared(session.conn, name.c_str(), params.size(),
                                values.data(), nullptr, nullptr, 0));
  } else {
    result.reset(PQexecParams(session.conn, sql.c_str(), params.size(), nullptr,
                              values.data(), nullptr, nullptr, 0));
  }
  return result;
}

Result Exec(Session session, const char* operation, const std::string& sql,
            const Params& params) {
  if (NeedsLocalSettings(session)) {
    // One round trip all the same: the settings ride in its pipeline.
    std::vector<Result> results =
        ExecPipelined(session, operation, {Statement{sql, params}});
    return std::move(results.front());
  }
  Result result = ExecUnchecked(session, operation, sql, params);
  if (!Succeeded(result.get()))
    ThrowError(operation, session.conn, result.get());
  return result;
}

namespace {

// Queues one statement in pipeline mode; false when libpq refuses it.
bool SendPipelined(Session session, const std::string* name,
                   const Statement& statement) {
  const std::vector<const char*> values = statement.params.Pointers();
  const int n = statement.params.size();
  if (name != nullptr) {
    return PQsendQueryPrepared(session.conn, name->c_str(), n, values.data(),
                               nullptr, nullptr, 0) == 1;
  }
  return PQsendQueryParams(session.conn, statement.sql.c_str(), n, nullptr,
                           values.data(), nullptr, nullptr, 0) == 1;
}

// Reads what the server sent for each queued statement, through the sync
// point, so the connection is in a clean state whatever happened. Returns
// the index of the first failed statement, or -1.
int DrainPipeline(PGconn* conn, std::size_t count, std::vector<Result>& out) {
  int failed = -1;
  for (std::size_t i = 0; i < count; ++i) {
    Result r(PQgetResult(conn));
    if (r == nullptr) return failed < 0 ? static_cast<int>(i) : failed;
    // Each statement's results end with a null result.
    while (PGresult* extra = PQgetResult(conn)) PQclear(extra);
    if (failed < 0 && !Succeeded(r.get())) failed = static_cast<int>(i);
    out.push_back(std::move(r));
  }
  Result sync(PQgetResult(conn));
  if (sync == nullptr || PQresultStatus(sync.get()) != PGRES_PIPELINE_SYNC) {
    if (failed < 0) failed = static_cast<int>(count);
  }
  return failed;
}

// Statement names for a pipeline, prepared beforehand (a round trip of its
// own, once per connection and statement). Preparing one statement can make
// the cache start over and drop the others on the server, so the names
// count only when the cache kept its generation throughout; the second pass
// finds the cache nearly empty and cannot start over again.
std::vector<std::string> PrepareAll(Session session, const char* operation,
                                    const std::vector<Statement>& statements) {
  std::vector<std::string> names;
  if (session.cache == nullptr) return names;  // unnamed statements
  for (;;) {
    names.clear();
    const std::uint64_t generation = session.cache->generation();
    for (const Statement& st : statements) {
      names.push_back(session.cache->Prepare(session.conn, operation, st.sql,
                                             st.params.size()));
    }
    if (session.cache->generation() == generation) return names;
  }
}

// Reads up to and including the sync point after a pipeline's last
// statement. True when the sync came; `error` keeps the first error the
// server sent before it (the implicit COMMIT's refusal). False when the
// connection broke first.
bool ReadSync(PGconn* conn, Result& error) {
  for (int nulls = 0; nulls < 1000;) {
    Result r(PQgetResult(conn));
    if (r == nullptr) {
      if (PQstatus(conn) != CONNECTION_OK) return false;
      ++nulls;
      continue;
    }
    if (PQresultStatus(r.get()) == PGRES_PIPELINE_SYNC) return true;
    if (!error && !Succeeded(r.get())) error = std::move(r);
  }
  return false;
}

// Leaves pipeline mode whatever happened before. When results are still
// pending on a live connection, they are synced and drained first; false
// when even that fails (the connection is then unusable and not pooled).
bool LeavePipeline(PGconn* conn) {
  if (PQpipelineStatus(conn) == PQ_PIPELINE_OFF) return true;
  if (PQexitPipelineMode(conn) == 1) return true;
  if (PQstatus(conn) != CONNECTION_OK || PQpipelineSync(conn) != 1) {
    return false;
  }
  // Everything up to and including the sync point (an earlier sync still
  // unread comes first).
  for (Result ignored; ReadSync(conn, ignored);) {
    if (PQexitPipelineMode(conn) == 1) return true;
  }
  return false;
}

}  // namespace

std::vector<Result> ExecPipelined(Session session, const char* operation,
                                  const std::vector<Statement>& requested) {
  if (PQpipelineStatus(session.conn) != PQ_PIPELINE_OFF) {
    // A borrowed connection put into the caller's own pipeline after
    // Tx::Borrow; preparing (a synchronous call) would fail there too.
    throw InvalidArgument(operation, "the connection is in pipeline mode");
  }
  // The statements up to the sync point are one transaction (or the start
  // of one, when a BEGIN follows), so settings made first hold for all.
  // After a leading BEGIN, though: its isolation level must come before any
  // query (the settings' SELECT takes a snapshot), which matters when the
  // server's default is not READ COMMITTED.
  const bool with_settings = NeedsLocalSettings(session);
  const std::size_t settings_at =
      !requested.empty() && requested.front().sql.starts_with("BEGIN") ? 1 : 0;
  std::vector<Statement> prefixed;
  if (with_settings) {
    prefixed = requested;
    prefixed.insert(prefixed.begin() + settings_at,
                    Statement{*session.local_settings, {}});
  }
  const std::vector<Statement>& statements =
      with_settings ? prefixed : requested;
  const std::vector<std::string> names =
      PrepareAll(session, operation, statements);
  if (PQenterPipelineMode(session.conn) != 1) {
    ThrowError(operation, session.conn, nullptr);
  }
  bool sent = true;
  for (std::size_t i = 0; i < statements.size() && sent; ++i) {
    sent = SendPipelined(session, names.empty() ? nullptr : &names[i],
                         statements[i]);
  }
  sent = sent && PQpipelineSync(session.conn) == 1;
  std::vector<Result> results;
  const int failed =
      sent ? DrainPipeline(session.conn, statements.size(), results) : -1;
  const bool left = LeavePipeline(session.conn);
  // The statement's own error first: it carries the SQLSTATE.
  if (failed >= 0 && static_cast<std::size_t>(failed) < results.size()) {
    ThrowError(operation, session.conn, results[failed].get());
  }
  if (!sent || !left || failed >= 0) {
    ThrowError(operation, session.conn, nullptr);
  }
  if (with_settings) results.erase(results.begin() + settings_at);
  for (Result& r : results) r.set_operation(operation);
  return results;
}

namespace {

// A result that says the connection is going away: class 08, or the server
// terminating the backend (57P01..57P03), whose socket closes next.
bool SaysConnectionGone(const PGresult* result) {
  const char* state =
      result ? PQresultErrorField(result, PG_DIAG_SQLSTATE) : nullptr;
  if (state == nullptr) return false;
  const std::string_view s(state);
  return s.starts_with("08") || s == "57P01" || s == "57P02" || s == "57P03";
}

}  // namespace

ServerIdentity ReadServerIdentity(PGconn* conn, const char* operation) {
  // pg_backend_pid() is compared with the pid libpq connected to: behind a
  // pooler they differ, and no backend of ours can be watched.
  Result r(PQexecParams(
      conn,
      "SELECT s.system_identifier::text, (extract(epoch FROM "
      "pg_catalog.pg_postmaster_start_time()) * 1e6)::bigint::text, "
      "pg_catalog.pg_backend_pid() FROM pg_catalog.pg_control_system() s",
      0, nullptr, nullptr, nullptr, nullptr, 0));
  ServerIdentity identity;
  if (!Succeeded(r.get()) || r.rows() != 1) {
    if (PQstatus(conn) != CONNECTION_OK || SaysConnectionGone(r.get())) {
      ThrowError(operation, conn, r.get());
    }
    return identity;  // unknown: e.g. a server without pg_control_system
  }
  identity.backend_pid = PQbackendPID(conn);
  r.set_operation(operation);
  if (r.Int64(0, 2) != identity.backend_pid) return identity;
  identity.system_identifier = std::string(r.Text(0, 0));
  identity.started = std::string(r.Text(0, 1));
  return identity;
}

bool DefaultIsReadCommitted(PGconn* conn) {
  // Compared here, not with SQL's `=`: behind a transaction pooler this
  // runs without the pinned search_path, where an operator another role
  // planted could stand in for pg_catalog's.
  Result r(PQexec(conn,
                  "SELECT pg_catalog.current_setting("
                  "'default_transaction_isolation')"));
  return Succeeded(r.get()) && r.rows() == 1 &&
         r.Text(0, 0) == "read committed";
}

bool LooksAlive(PGconn* conn) {
  // An idle connection has nothing to say but notifications; an error or
  // EOF means the server ended it. A terminated backend sends its FATAL
  // and then closes: libpq takes the FATAL of an idle connection as a
  // notice (to the notice receiver) and sees the end of the stream only on
  // the next read, so read until nothing is pending (bounded: a flood of
  // notifications is not worth more than a few reads here).
  for (int reads = 0; reads < 4; ++reads) {
    if (PQstatus(conn) != CONNECTION_OK) return false;
    pollfd p{PQsocket(conn), POLLIN, 0};
    if (::poll(&p, 1, 0) <= 0) return true;  // nothing pending: as it was
    if (PQconsumeInput(conn) == 0) return false;
  }
  return PQstatus(conn) == CONNECTION_OK;
}

namespace {

// The results of ExecCommitted's pipeline judged: `commit` is COMMIT's
// index, the statement's is just before it. Throws the server's refusal;
// returns whether the outcome is in doubt.
bool JudgeCommitted(Session session, const char* operation,
                    const std::vector<Result>& results, std::size_t commit,
                    bool left) {
  const auto ok = [&](std::size_t i) {
    return i < results.size() && Succeeded(results[i].get());
  };
  bool gone = !session.open() || !left;
  for (const Result& r : results) gone = gone || SaysConnectionGone(r.get());
  if (ok(commit) && results[commit].CommandTag() == "COMMIT") {
    return false;
  }
  // A statement before COMMIT refused by the server (an error with a
  // SQLSTATE; libpq's own for a lost connection have none): the server
  // skipped COMMIT, or ended the backend before it (57P01).
  for (std::size_t i = 0; i < commit && i < results.size(); ++i) {
    if (!ok(i) && PQresultStatus(results[i].get()) == PGRES_FATAL_ERROR &&
        PQresultErrorField(results[i].get(), PG_DIAG_SQLSTATE) != nullptr) {
      RollbackQuietly(session);
      ThrowError(operation, session.conn, results[i].get());
    }
  }
  if (gone) return true;
  // COMMIT itself refused (a deferred constraint): nothing committed.
  RollbackQuietly(session);
  ThrowError(operation, session.conn,
             results.size() > commit ? results[commit].get() : nullptr);
}

// BEGIN, the session's local settings, the statement, a flush request and
// COMMIT: for a session behind a transaction pooler, whose settings hold
// per transaction only and whose isolation default is the server's, and for
// any session whose default isolation is not READ COMMITTED.
CommittedExec ExecInBlock(Session session, const char* operation,
                          const Statement& statement) {
  std::vector<Statement> all = {{"BEGIN ISOLATION LEVEL READ COMMITTED", {}}};
  if (NeedsLocalSettings(session)) {
    all.push_back(Statement{*session.local_settings, {}});
  }
  all.push_back(statement);
  all.push_back(Statement{"COMMIT", {}});
  const std::size_t commit = all.size() - 1;
  const std::vector<std::string> names = PrepareAll(session, operation, all);
  if (PQenterPipelineMode(session.conn) != 1) {
    ThrowError(operation, session.conn, nullptr);
  }
  bool sent = true;
  for (std::size_t i = 0; i < all.size() && sent; ++i) {
    // The flush request makes the server send the statement's result
    // before it runs COMMIT, instead of at the sync.
    if (i == commit) sent = PQsendFlushRequest(session.conn) == 1;
    sent = sent &&
           SendPipelined(session, names.empty() ? nullptr : &names[i], all[i]);
  }
  sent = sent && PQpipelineSync(session.conn) == 1;
  std::vector<Result> results;
  if (sent) DrainPipeline(session.conn, all.size(), results);
  const bool left = LeavePipeline(session.conn);
  CommittedExec out;
  out.in_doubt =
      !sent || JudgeCommitted(session, operation, results, commit, left);
  if (results.size() > commit - 1 && Succeeded(results[commit - 1].get())) {
    out.rows = std::move(results[commit - 1]);
    out.rows.set_operation(operation);
  }
  return out;
}

// The statement alone in an implicit transaction, which the server commits
// at the sync point: no BEGIN or COMMIT to parse, bind and run. Only for a
// session whose default isolation is READ COMMITTED (pinned by
// kPinnedOptions, checked at open). The flush request still makes the
// server send the statement's result before it commits.
CommittedExec ExecImplicit(Session session, const char* operation,
                           const Statement& statement) {
  const std::vector<std::string> names =
      PrepareAll(session, operation, {statement});
  if (PQenterPipelineMode(session.conn) != 1) {
    ThrowError(operation, session.conn, nullptr);
  }
  const bool sent =
      SendPipelined(session, names.empty() ? nullptr : &names[0], statement) &&
      PQsendFlushRequest(session.conn) == 1 &&
      PQpipelineSync(session.conn) == 1;
  CommittedExec out;
  Result refused;  // the server's answer at the sync instead of committing
  bool synced = false;
  if (sent) {
    out.rows.reset(PQgetResult(session.conn));
    if (out.rows != nullptr) {
      while (PGresult* extra = PQgetResult(session.conn)) PQclear(extra);
    }
    if (out.rows == nullptr || PQstatus(session.conn) == CONNECTION_OK) {
      synced = ReadSync(session.conn, refused);
    }
  }
  // A live connection whose sync point never came is out of step with the
  // server (a libpq that skips the sync after an error at it, before 15.5):
  // left in pipeline mode, the pool discards it instead of reusing it.
  if (synced || !session.open()) LeavePipeline(session.conn);
  const bool statement_ok = out.rows != nullptr && Succeeded(out.rows.get());
  if (!statement_ok) {
    // Refused by the server (an error with a SQLSTATE, 57P01 included: the
    // statement did not complete, so nothing committed).
    if (out.rows != nullptr &&
        PQresultErrorField(out.rows.get(), PG_DIAG_SQLSTATE) != nullptr) {
      ThrowError(operation, session.conn, out.rows.get());
    }
    out.rows.reset();
    out.in_doubt = true;  // sent, and nothing came back
    return out;
  }
  out.rows.set_operation(operation);
  if (synced && refused == nullptr) return out;  // committed
  // The commit refused (a deferred constraint), and the server then said it
  // is ready again: nothing committed. Without that ReadyForQuery the error
  // may have come after the commit record (the server then PANICs), so the
  // outcome is in doubt like any break.
  if (synced && refused != nullptr &&
      PQresultErrorField(refused.get(), PG_DIAG_SQLSTATE) != nullptr &&
      !SaysConnectionGone(refused.get())) {
    ThrowError(operation, session.conn, refused.get());
  }
  out.in_doubt = true;
  return out;
}

}  // namespace

CommittedExec ExecCommitted(Session session, const char* operation,
                            const Statement& statement) {
  if (PQpipelineStatus(session.conn) != PQ_PIPELINE_OFF) {
    throw InvalidArgument(operation, "the connection is in pipeline mode");
  }
  if (!session.open()) ThrowError(operation, session.conn, nullptr);
  // The implicit transaction runs at the session's default isolation: only
  // where that is READ COMMITTED (pinned at startup, unless something in
  // between dropped the startup options).
  const bool implicit =
      !NeedsLocalSettings(session) && session.read_committed_default;
  return implicit ? ExecImplicit(session, operation, statement)
                  : ExecInBlock(session, operation, statement);
}

Result ExecScript(PGconn* conn, const char* operation, const std::string& sql) {
  Result result(PQexec(conn, sql.c_str()), operation);
  if (!Succeeded(result.get())) ThrowError(operation, conn, result.get());
  return result;
}

Result ExecScript(Session session, const char* operation,
                  const std::string& sql) {
  if (!NeedsLocalSettings(session)) {
    return ExecScript(session.conn, operation, sql);
  }
  return ExecScript(session.conn, operation,
                    *session.local_settings + "; " + sql);
}

bool Session::open() const { return PQstatus(conn) == CONNECTION_OK; }

bool Session::in_pipeline() const {
  return PQpipelineStatus(conn) != PQ_PIPELINE_OFF;
}

TransactionStatus Session::transaction_status() const {
  switch (PQtransactionStatus(conn)) {
    case PQTRANS_IDLE:
      return TransactionStatus::kIdle;
    case PQTRANS_ACTIVE:
      return TransactionStatus::kActive;
    case PQTRANS_INTRANS:
      return TransactionStatus::kInTransaction;
    case PQTRANS_INERROR:
      return TransactionStatus::kInError;
    case PQTRANS_UNKNOWN:
      break;
  }
  return TransactionStatus::kUnknown;
}

void ConnDeleter::operator()(pg_conn* c) const noexcept { PQfinish(c); }

CancelHandle::CancelHandle(pg_conn* conn) : cancel_(PQgetCancel(conn)) {}

void CancelHandle::Free::operator()(pg_cancel* c) const noexcept {
  PQfreeCancel(c);
}

void CancelHandle::Send() const noexcept {
  if (!cancel_) return;
  char error[256];
  PQcancel(cancel_.get(), error, sizeof error);
}

bool Commit(Session session, const char* operation) {
  // Prepared like any statement (unless the session sends unnamed ones);
  // preparing may fail, and then COMMIT was never sent.
  Result r = ExecUnchecked(session, operation, "COMMIT");
  if (!Succeeded(r.get())) {
    if (!session.open() || SaysConnectionGone(r.get())) {
      throw CommitOutcomeUnknown(
          operation,
          "the connection broke during COMMIT; the transaction may or may "
          "not have committed");
    }
    ThrowError(operation, session.conn, r.get());
  }
  // An aborted transaction answers COMMIT with the tag ROLLBACK.
  return r.CommandTag() != "ROLLBACK";
}

void RollbackQuietly(Session session) {
  if (!session.open() ||
      session.transaction_status() == TransactionStatus::kIdle) {
    return;
  }
  Result(PQexec(session.conn, "ROLLBACK"));
}

namespace {

// What every connection the library opens gets unless the caller's conninfo
// says otherwise: a dead peer becomes an error within about half a minute
// instead of a ROLLBACK that hangs for the kernel's two hours.
constexpr std::pair<const char*, const char*> kConnectionDefaults[] = {
    {"connect_timeout", "10"},     {"keepalives_idle", "10"},
    {"keepalives_interval", "5"},  {"keepalives_count", "3"},
    {"tcp_user_timeout", "30000"},
};

}  // namespace

std::string PinnedOptions(std::string options) {
  // Appended last, so it wins over an earlier -c search_path (or isolation)
  // of the caller.
  if (!options.empty()) options += ' ';
  return options + kPinnedOptions;
}

ConnParams ForConnection(ConnParams params) {
  // Every other role is untrusted: with pg_catalog first (and nothing else
  // searched for functions and operators), no object anyone created in
  // public or in a schema of a database-level search_path can stand in for
  // a built-in one inside our statements.
  std::string options = params.count("options") != 0 ? params["options"] : "";
  if (options.empty()) {
    if (const char* env = std::getenv("PGOPTIONS")) options = env;
  }
  params["options"] = PinnedOptions(options);
  // Keys and payloads travel as UTF-8 whatever the database's encoding:
  // the libpq keyword overrides a client_encoding of the conninfo or
  // PGCLIENTENCODING, and PgBouncer applies it to every server connection
  // it hands out; LocalSettingsSql repeats it per transaction.
  params["client_encoding"] = kClientEncoding;
  for (const auto& [key, value] : kConnectionDefaults) {
    const bool from_env = std::string_view(key) == "connect_timeout" &&
                          std::getenv("PGCONNECT_TIMEOUT") != nullptr;
    if (params.count(key) == 0 && !from_env) params[key] = value;
  }
  return params;
}

namespace {

// A setting name as postgres takes it on its command line (`--a-b=1` is
// a_b); only identifier characters and dots (custom settings).
bool ValidSettingName(const std::string& name) {
  if (name.empty()) return false;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                    (c >= '0' && c <= '9') || c == '_' || c == '.';
    if (!ok) return false;
  }
  return true;
}

// The words of an options string as the server splits it: on unescaped
// white space, a backslash taking the next character literally.
std::vector<std::string> SplitOptions(const std::string& options) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;
  for (std::size_t i = 0; i < options.size(); ++i) {
    const char c = options[i];
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      if (in_word) words.push_back(std::move(word));
      word.clear();
      in_word = false;
      continue;
    }
    in_word = true;
    if (c == '\\' && i + 1 < options.size()) {
      word.push_back(options[++i]);
    } else {
      word.push_back(c);
    }
  }
  if (in_word) words.push_back(std::move(word));
  return words;
}

// `literal` as a SQL string literal that reads the same whatever
// standard_conforming_strings is.
std::string SqlLiteral(const std::string& value) {
  std::string out;
  bool backslash = false;
  for (char c : value) {
    if (c == '\'') out.push_back('\'');
    if (c == '\\') {
      out.push_back('\\');
      backslash = true;
    }
    out.push_back(c);
  }
  return (backslash ? "E'" : "'") + out + "'";
}

}  // namespace

std::vector<std::pair<std::string, std::string>> OptionSettings(
    const std::string& options, const char* operation) {
  const std::vector<std::string> words = SplitOptions(options);
  std::vector<std::pair<std::string, std::string>> settings;
  for (std::size_t i = 0; i < words.size(); ++i) {
    std::string setting;
    if (words[i] == "-c" && i + 1 < words.size()) {
      setting = words[++i];
    } else if (words[i].starts_with("-c") && words[i].size() > 2) {
      setting = words[i].substr(2);
    } else if (words[i].starts_with("--")) {
      setting = words[i].substr(2);
    }
    const std::size_t eq = setting.find('=');
    std::string name = setting.substr(0, eq);
    for (char& c : name) {
      if (c == '-') c = '_';
    }
    if (eq == std::string::npos || !ValidSettingName(name)) {
      throw InvalidArgument(
          operation,
          "the connection's options (conninfo or PGOPTIONS) hold something "
          "other than -c name=value settings, which cannot be applied per "
          "transaction (prepared_statements = false)");
    }
    settings.emplace_back(std::move(name), setting.substr(eq + 1));
  }
  return settings;
}

std::string LocalSettingsSql(const ConnParams& params, const char* operation) {
  const ConnParams all = ForConnection(params);
  const auto it = all.find("options");
  std::string sql;
  auto settings = OptionSettings(it == all.end() ? "" : it->second, operation);
  settings.emplace_back("client_encoding", kClientEncoding);
  for (const auto& [name, value] : settings) {
    sql += sql.empty() ? "SELECT " : ", ";
    sql += "pg_catalog.set_config(" + SqlLiteral(name) + ", " +
           SqlLiteral(value) + ", true)";
  }
  return sql;
}

ParamArrays::ParamArrays(const ConnParams& params) {
  for (const auto& [key, value] : params) {
    keywords.push_back(key.c_str());
    values.push_back(value.c_str());
  }
  keywords.push_back(nullptr);
  values.push_back(nullptr);
}

namespace {

std::string ResultField(const PGresult* result, int field) {
  const char* value = PQresultErrorField(result, field);
  return value != nullptr ? value : "";
}

// libpq calls this from inside its own C code: nothing may escape.
void ReceiveNotice(void* arg, const PGresult* result) noexcept {
  const auto* handler = static_cast<const NoticeHandler*>(arg);
  if (handler == nullptr || !*handler || result == nullptr) return;
  try {
    Notice notice{ResultField(result, PG_DIAG_SEVERITY_NONLOCALIZED),
                  ResultField(result, PG_DIAG_SQLSTATE),
                  ResultField(result, PG_DIAG_MESSAGE_PRIMARY)};
    if (notice.severity.empty()) {
      notice.severity = ResultField(result, PG_DIAG_SEVERITY);
    }
    (*handler)(notice);
  } catch (...) {
  }
}

}  // namespace

void RouteNotices(PGconn* conn, const NoticeHandler* handler) {
  if (conn == nullptr) return;
  PQsetNoticeReceiver(conn, &ReceiveNotice,
                      const_cast<NoticeHandler*>(handler));
}

ConnPtr Connect(const ConnParams& params, const std::string& application_name,
                const char* operation, const NoticeHandler* notices,
                StartupOptions startup) {
  ConnParams all = ForConnection(params);
  // A transaction pooler refuses the startup parameter, or accepts and
  // drops it; the caller applies the settings per transaction instead.
  if (startup == StartupOptions::kPerTransaction) all.erase("options");
  // The client's application_name wins over the conninfo's.
  all["application_name"] = application_name;
  const ParamArrays arrays(all);
  ConnPtr conn(PQconnectdbParams(arrays.keywords.data(), arrays.values.data(),
                                 /*expand_dbname=*/0));
  RouteNotices(conn.get(), notices);
  if (!conn || PQstatus(conn.get()) != CONNECTION_OK) {
    ThrowConnectFailure(operation, conn.get());
  }
  return conn;
}

std::string QuoteIdentifier(PGconn* conn, const std::string& name) {
  char* quoted = PQescapeIdentifier(conn, name.c_str(), name.size());
  if (quoted == nullptr) {
    throw InvalidArgument("QuoteIdentifier", TrimmedErrorMessage(conn));
  }
  std::string out(quoted);
  PQfreemem(quoted);
  return out;
}

std::string QuoteLiteral(PGconn* conn, const std::string& value) {
  char* quoted = PQescapeLiteral(conn, value.c_str(), value.size());
  if (quoted == nullptr) {
    throw InvalidArgument("QuoteLiteral", TrimmedErrorMessage(conn));
  }
  std::string out(quoted);
  PQfreemem(quoted);
  return out;
}

[[noreturn]] void ThrowError(const char* operation, PGconn* conn,
                             const PGresult* result) {
  const char* state =
      result ? PQresultErrorField(result, PG_DIAG_SQLSTATE) : nullptr;
  // The primary message only: DETAIL lines can quote key values.
  const char* primary =
      result ? PQresultErrorField(result, PG_DIAG_MESSAGE_PRIMARY) : nullptr;
  std::string message =
      primary ? std::string(primary) : TrimmedErrorMessage(conn);
  // The server quotes the bytes it could not convert, which belong to a
  // message key or payload: name the encoding only.
  if (state != nullptr && (std::string_view(state) == kUntranslatable ||
                           std::string_view(state) == kNotInRepertoire)) {
    const char* encoding =
        conn ? PQparameterStatus(conn, "server_encoding") : nullptr;
    message = std::string("a message key or payload holds a character that ") +
              "the database encoding (" + (encoding ? encoding : "?") +
              ") cannot represent, or an escape it cannot store";
  }
  const bool broken = conn == nullptr || PQstatus(conn) == CONNECTION_BAD;
  ThrowForSqlState(operation, state ? state : "", message, broken);
}

}  // namespace compaction::pg
