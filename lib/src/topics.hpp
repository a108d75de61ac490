// Topic resolution shared by every operation.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "compaction/errors.hpp"
#include "core.hpp"
#include "pg/exec.hpp"
#include "pg/sqlstate.hpp"

namespace compaction::detail {

// Turns "schema or table missing" (the schema is not installed) into
// SchemaVersionMismatch with found() == 0; rethrows anything else.
[[noreturn]] void RethrowSchemaMissing(const ClientCore& core,
                                       const char* operation,
                                       const DatabaseError& error);

// Looks the topic up through `session` (and so inside its transaction, if
// any), checking its baseline version. Throws TopicNotFound,
// SchemaVersionMismatch (also when the schema is not installed). Caches
// what it found in `core`, unless `session` is a borrowed connection.
// `lock_timeout`, when given, receives the session's lock_timeout setting
// from the same round trip.
TopicInfo ResolveTopic(ClientCore& core, pg::Session session,
                       const char* operation, const std::string& name,
                       std::string* lock_timeout = nullptr);
// ResolveTopic in two halves, for a caller that sends the look-up in a
// pipeline with other statements (the name validated by the caller).
pg::Statement ResolveTopicStatement(const ClientCore& core,
                                    const std::string& name);
TopicInfo ParseResolvedTopic(const pg::Result& r, const char* operation,
                             const std::string& name,
                             std::string* lock_timeout = nullptr);

// A transaction's first statement(s), on a topic the client has cached:
// BEGIN, the topic's look-up and build(cached topic) go out in one round
// trip instead of three. The look-up still decides, as on the long way:
// when it finds another id (the topic was destroyed and registered again;
// after a schema reinstall the id may name another topic's objects) or
// other partitions, none, or a schema of another version (the statement's
// outcome under the cached id, error or not, then says nothing of the
// topic), the transaction, which holds nothing of the caller's yet, is
// rolled back, the client's cache corrected, and the caller takes the long
// way (nullopt). When the look-up agrees, the statement's error is thrown,
// as on the long way. `build` may throw before anything is sent.
struct LookedUp {
  TopicInfo topic;
  std::vector<pg::Result> results;  // the built statements', in order
  std::string lock_timeout;         // the session's, as the look-up read it
};
std::optional<LookedUp> RunWithLookup(
    ClientCore& core, pg::Session session, const char* operation,
    const std::string& name,
    const std::function<std::vector<pg::Statement>(const TopicInfo&)>& build);

// Runs fn(session, topic) on a pooled connection with the topic resolved
// through the client's cache. When the cached id names a table or function
// that no longer exists (the topic was destroyed, perhaps re-created; an
// autocommit compacted produce calls produce_<id>), resolves again and
// retries once.
template <class F>
decltype(auto) WithTopic(ClientCore& core, const char* operation,
                         const std::string& name, F&& fn) {
  return WithConnection(core, operation, [&](pg::Session session) {
    std::optional<TopicInfo> topic = core.CachedTopic(name);
    if (!topic) topic = ResolveTopic(core, session, operation, name);
    try {
      return fn(session, *topic);
    } catch (const DatabaseError& e) {
      if (e.sqlstate() != pg::kUndefinedTable &&
          e.sqlstate() != pg::kUndefinedFunction) {
        throw;
      }
      core.ForgetTopic(name);
      return fn(session, ResolveTopic(core, session, operation, name));
    }
  });
}

}  // namespace compaction::detail
