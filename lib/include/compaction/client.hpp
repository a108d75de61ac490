// Client: the entry point. Owns a bounded pool of libpq connections and the
// schema name every query uses.
//
// Lifetime: copies share one pool; handles and producers keep it alive.
// Thread safety: every member may be called from many threads at once.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "compaction/detail/entry_points.hpp"
#include "compaction/export.hpp"
#include "compaction/options.hpp"
#include "compaction/stats.hpp"
#include "compaction/topic.hpp"
#include "compaction/tx.hpp"

namespace compaction {

// Version of the SQL baselines this library was built for.
inline constexpr int kSystemBaselineVersion = 1;
inline constexpr int kTopicBaselineVersion = 1;

class COMPACTION_EXPORT Client {
 public:
  // `conninfo` is a libpq keyword/value string or URI; empty uses the PG*
  // environment variables (and the passfile). Opens one connection to check
  // the server is reachable and, when the schema is installed, that its
  // version matches (SchemaVersionMismatch otherwise).
  static Client Connect(const std::string& conninfo,
                        ClientOptions options = {});
  // The same with libpq keyword -> value parameters (what PQconnectdbParams
  // takes; unset ones come from the environment), for a caller that holds
  // them as such: nothing is rendered into a string and parsed again.
  static Client Connect(const std::map<std::string, std::string>& params,
                        ClientOptions options = {});

  // Creates the schema and the system baseline when absent and records its
  // version. Idempotent and safe to run concurrently; refuses a database at
  // another version with SchemaVersionMismatch.
  void InstallSchema();

  // Creates or refreshes the shipped least-privilege roles for this schema
  // (sql/roles_v1.sql): <prefix>_owner (NOLOGIN; owns the schema, its tables
  // and the registration function), <prefix>_app (read, produce, lock,
  // register), <prefix>_janitor (sweeps) and <prefix>_monitor (stats).
  // `role_prefix` empty: the schema name; else 1-63 of a-z 0-9 _, not
  // starting with a digit or "pg_" (InvalidArgument). Needs a role that may
  // create roles and take ownership (a superuser), after InstallSchema
  // (SchemaVersionMismatch before). Idempotent.
  void InstallRoles(const std::string& role_prefix = {});

  template <Message M>
  TopicHandle<M> Topic(std::string name) const {
    return TopicHandle<M>(core_, std::move(name));
  }

  // Starts a transaction on a pooled connection (READ COMMITTED).
  Tx Begin();

  // Runs body(Tx&) in a transaction: commits when it returns, rolls back
  // when it throws (the exception propagates).
  template <class F>
  decltype(auto) InTransaction(F&& body) {
    Tx tx = Begin();
    if constexpr (std::is_void_v<std::invoke_result_t<F, Tx&>>) {
      std::forward<F>(body)(tx);
      tx.Commit();
    } else {
      auto result = std::forward<F>(body)(tx);
      tx.Commit();
      return result;
    }
  }

  // Every registered topic, by name.
  std::vector<TopicInfo> ListTopics() const;
  // Every registered topic with its stats, as of one ListTopics: the stats
  // of many topics are read per round trip on one pooled connection. A topic
  // destroyed meanwhile is left out; any other error fails the whole call.
  // Throws InvalidArgument (before any I/O) for a bad option.
  std::vector<TopicOverview> ListTopicStats(
      const StatsOptions& options = {}) const;
  // An operator's reset of every partition of a consumer: to the start
  // (every message is delivered again) or to the end (what is committed now
  // counts as consumed). A Poll in progress finishes first; its advance is
  // overwritten. Returns the positions changed (0: no such consumer).
  // Throws InvalidArgument for a bad name, before any I/O.
  int ResetConsumer(const std::string& topic, const std::string& consumer,
                    bool to_end);
  // Deletes a consumer's positions; returns how many (0: none). Needs DELETE
  // on consumer_position, which only the owner role has; another role gets
  // the server's DatabaseError (42501).
  int DropConsumer(const std::string& topic, const std::string& consumer);
  // Untyped TopicHandle<M>::Stats(options).
  TopicStats Stats(const std::string& topic_name,
                   const StatsOptions& options = {}) const;

  const ClientOptions& options() const;

 private:
  friend class Janitor;    // shares the pool
  friend class TopicTail;  // likewise

  explicit Client(std::shared_ptr<detail::ClientCore> core);
  const std::shared_ptr<detail::ClientCore>& core() const { return core_; }
  std::shared_ptr<detail::ClientCore> core_;
};

}  // namespace compaction
