// Running statements: parameters, the per-connection prepared statement
// cache, one statement, a pipeline of them, one in a transaction of its
// own, scripts, COMMIT and ROLLBACK. Each checks what came back and throws
// the mapped compaction::Error.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "pg/result.hpp"
#include "pg/session.hpp"

namespace compaction::pg {

class Params;

// libpq's array of parameter values: on the stack for the few parameters
// most statements take, so sending a statement allocates nothing for it.
// Points into the Params it was made from (Params::Pointers), which must
// outlive it; neither copied nor moved, so it never points into another.
class ParamPointers {
 public:
  ParamPointers(const ParamPointers&) = delete;
  ParamPointers& operator=(const ParamPointers&) = delete;
  const char* const* data() const {
    return on_heap_.empty() ? inline_.data() : on_heap_.data();
  }

 private:
  friend class Params;
  explicit ParamPointers(const std::vector<std::optional<std::string>>& values);
  std::array<const char*, 8> inline_{};
  std::vector<const char*> on_heap_;
};

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
  ParamPointers Pointers() const { return ParamPointers(values_); }

 private:
  std::vector<std::optional<std::string>> values_;
};

// No slot: the statement is looked up by its text.
inline constexpr std::size_t kNoSlot = static_cast<std::size_t>(-1);

// SQL text built once and kept for the life of its ClientCore
// (ClientCore::Sql), with a slot number of its own in that core, so that a
// connection finds its prepared statement by index instead of hashing the
// text on every call. The text is compared all the same (a memcmp): a Tx
// of one client may serve a topic handle of another, whose slots mean
// other statements.
struct FixedSql {
  std::string text;
  std::size_t slot = kNoSlot;
};

// "c<16 hex digits>_": a statement-name prefix no other cache shares.
std::string RandomStatementPrefix();

// Per-connection cache of prepared statements, keyed by SQL text. Not
// thread-safe: it belongs to one connection.
class PreparedCache {
 public:
  // Returns the statement name for `sql`, preparing it on first use;
  // found by `slot` (FixedSql) when it has one, else by its text.
  const std::string& Prepare(pg_conn* conn, const char* operation,
                             const std::string& sql, int n_params,
                             std::size_t slot = kNoSlot);
  void Clear() {
    names_.clear();
    by_slot_.clear();
    slotted_ = 0;
    ++generation_;
  }
  // Changes whenever the cache starts over (DEALLOCATE ALL): names handed
  // out before are then gone on the server too.
  std::uint64_t generation() const { return generation_; }

  // Statements kept per connection before the cache starts over.
  static constexpr std::size_t kMaxPrepared = 512;
  // FixedSql slots indexed directly (9 per topic, numbered across the
  // process: some 225 topics' worth); higher ones are looked up by text.
  static constexpr std::size_t kMaxSlots = 2048;

 private:
  std::unordered_map<std::string, std::string> names_;
  // By FixedSql slot; an empty name: not prepared on this connection.
  struct Slot {
    std::string sql;
    std::string name;
  };
  std::vector<Slot> by_slot_;
  std::size_t slotted_ = 0;
  // Random per cache, so per connection instance: behind a pooler that
  // mixes sessions, a name prepared by another client (or by another of
  // ours) is "does not exist", never someone else's statement.
  const std::string prefix_ = RandomStatementPrefix();
  std::uint64_t next_ = 0;
  std::uint64_t generation_ = 0;
};

// Runs one parameterized statement; throws the mapped error unless it
// returned rows or completed. On a session that needs_begin, BEGIN goes
// out in the same round trip (so do ExecPipelined and ExecScript).
Result Exec(Session session, const char* operation, const std::string& sql,
            const Params& params = {});
Result Exec(Session session, const char* operation, const FixedSql& sql,
            const Params& params = {});
// The same, but returns whatever result came back (null when libpq could
// not send it) for the caller to judge; throws only when preparing failed,
// and then the statement was never sent. Sends no BEGIN: for COMMIT and
// statements outside a Client::Begin transaction.
Result ExecUnchecked(Session session, const char* operation,
                     const std::string& sql, const Params& params = {});
// One statement of a pipeline: SQL text it owns, or a FixedSql it refers
// to (kept by its ClientCore for the core's life), so that the hot path's
// statements copy no SQL text per call.
class Statement {
 public:
  Statement() = default;
  Statement(std::string sql, Params values = {})
      : params(std::move(values)), owned_(std::move(sql)) {}
  Statement(const FixedSql& sql, Params values = {})
      : params(std::move(values)), fixed_(&sql) {}
  // It would refer to a temporary.
  Statement(FixedSql&&, Params = {}) = delete;
  const std::string& sql() const { return fixed_ ? fixed_->text : owned_; }
  std::size_t slot() const { return fixed_ ? fixed_->slot : kNoSlot; }

  Params params;

 private:
  std::string owned_;
  const FixedSql* fixed_ = nullptr;
};
// A statement as a pipeline sends it: its text and parameters by
// reference (they outlive the call), so that nothing is copied to send it.
struct StatementRef {
  const std::string* sql;
  const Params* params;
  std::size_t slot = kNoSlot;
};
inline StatementRef Ref(const Statement& statement) {
  return {&statement.sql(), &statement.params, statement.slot()};
}
// Runs the statements in order in one round trip (libpq pipeline mode) and
// returns their results. When one fails the server skips the rest; the
// first error is thrown after the pipeline is drained, and inside a
// transaction block it aborts the transaction like any failed statement.
std::vector<Result> ExecPipelined(Session session, const char* operation,
                                  const std::vector<Statement>& statements);
// The same, but returns each statement's result, failed ones included (for
// a caller that judges an earlier statement's result before a later one's
// error); still throws when the pipeline did not complete.
std::vector<Result> ExecPipelinedResults(
    Session session, const char* operation,
    const std::vector<Statement>& statements);
// Exec of one Statement (its slot included).
Result ExecStatement(Session session, const char* operation,
                     const Statement& statement);
// What ExecCommitted saw of a statement run in a transaction of its own.
struct CommittedExec {
  Result rows;            // the statement's result; null: never came back
  bool in_doubt = false;  // the connection broke after the statement was
                          // sent and before COMMIT answered: it may have
                          // committed
};
// Whether the server sends the statement's result before it commits (a
// flush request ahead of the commit), so that a caller whose COMMIT breaks
// holds what the statement returned (RETURNING) to look for. It costs a
// second packet, for which the client often wakes a second time
// (test/bench/RESULTS.md, P10); a caller that will not look sends none,
// and gets the result with the commit.
enum class ResultFirst : bool { kNo = false, kYes = true };
// Runs `statement` in a READ COMMITTED transaction of its own, in one round
// trip: the statement, a flush request (ResultFirst::kYes) and a sync (an
// implicit transaction the server commits at the sync; BEGIN and COMMIT
// around them instead behind a transaction pooler, with local settings, or
// where the session's default isolation is another). Throws the
// statement's (or COMMIT's) error when the server refused it (nothing
// committed; the connection is left idle), and ConnectionLost when the
// connection was already broken (nothing sent).
CommittedExec ExecCommitted(Session session, const char* operation,
                            const Statement& statement, ResultFirst first);
// The same for the last statement of a transaction block already open
// (one that needs_begin gets its BEGIN in the same round trip): the
// statement, a flush request (kYes) and COMMIT, judged as ExecCommitted
// judges them.
CommittedExec ExecAndCommit(Session session, const char* operation,
                            const Statement& statement, ResultFirst first);
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
// had failed); true without sending anything when the transaction never
// began (needs_begin). Throws CommitOutcomeUnknown when the connection broke
// with COMMIT sent: it may or may not have committed.
bool Commit(Session session, const char* operation);
// ROLLBACK when the connection is open and inside a transaction block;
// errors are dropped (the caller has news of its own, and a broken
// connection is the pool's to discard).
void RollbackQuietly(Session session);

}  // namespace compaction::pg
