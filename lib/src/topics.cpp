// Topic registry: registration, lookup, listing and removal.
#include "topics.hpp"

#include "compaction/client.hpp"
#include "sql_text.hpp"
#include "tx_internal.hpp"
#include "validate.hpp"

namespace compaction::detail {
namespace {

std::string TopicBaseline(const ClientCore& core, std::int64_t id) {
  return sql::Render(sql::k_topic_v1,
                     {{"{schema}", core.schema()}, {"{id}", std::to_string(id)}});
}

TopicInfo ParseTopic(const PGresult* r, int row) {
  return TopicInfo{pg::Int64(r, row, 0), std::string(pg::Text(r, row, 1)),
                   std::chrono::milliseconds(pg::Int64(r, row, 2))};
}

// `found` is 0 when the topic has no recorded baseline.
void CheckTopicVersion(const char* operation, const TopicInfo& topic,
                       int found) {
  if (found != kTopicBaselineVersion) {
    throw SchemaVersionMismatch(operation, "topic \"" + topic.name + "\" baseline",
                                found, kTopicBaselineVersion);
  }
}

// Tells LISTENing daemons that the topic set changed; delivered on commit.
void NotifyTopicChange(ClientCore& core, pg::Session session,
                       const std::string& name, const char* event) {
  pg::Exec(session, "NotifyTopicChange",
           "SELECT pg_notify('compaction_topics', json_build_object("
           "'schema', $1::text, 'topic', $2::text, 'event', $3::text)::text)",
           pg::Params().Add(core.options().schema).Add(name).Add(
               std::string(event)));
}

}  // namespace

[[noreturn]] void RethrowSchemaMissing(const ClientCore& core,
                                       const char* operation,
                                       const DatabaseError& error) {
  if (error.sqlstate() == pg::kUndefinedTable ||
      error.sqlstate() == pg::kInvalidSchemaName) {
    throw SchemaVersionMismatch(operation, "schema " + core.schema(), 0,
                                kSystemBaselineVersion);
  }
  throw error;
}

TopicInfo ResolveTopic(ClientCore& core, pg::Session session,
                       const char* operation, const std::string& name) {
  ValidateTopicName(operation, name);
  pg::Result r;
  try {
    r = pg::Exec(session, operation,
                 "SELECT t.id, t.name, t.headless_ttl_ms, v.version FROM " +
                     core.schema() + ".topic t LEFT JOIN " + core.schema() +
                     ".schema_version v ON v.topic_id = t.id "
                     "WHERE t.name = $1",
                 pg::Params().Add(name));
  } catch (const DatabaseError& e) {
    RethrowSchemaMissing(core, operation, e);
  }
  if (PQntuples(r.get()) == 0) throw TopicNotFound(operation, name);
  TopicInfo topic = ParseTopic(r.get(), 0);
  CheckTopicVersion(operation, topic,
                    pg::IsNull(r.get(), 0, 3)
                        ? 0
                        : static_cast<int>(pg::Int64(r.get(), 0, 3)));
  return topic;
}

TopicInfo RegisterTopic(ClientCore& core, const std::string& name,
                        const TopicConfig& config) {
  constexpr const char* kOp = "Register";
  ValidateTopicName(kOp, name);
  ValidateHeadlessTtl(kOp, config.headless_ttl);
  Tx tx = BeginTx(core);
  const pg::Session session = tx.state().session();
  // A concurrent registration of the same name waits on the unique index
  // here and then takes the update branch, so the DDL below runs once.
  pg::Result r = pg::Exec(
      session, kOp,
      "INSERT INTO " + core.schema() +
          ".topic AS t (name, headless_ttl_ms) VALUES ($1, $2) "
          "ON CONFLICT (name) DO UPDATE SET headless_ttl_ms = "
          "excluded.headless_ttl_ms, updated_at = now() "
          "RETURNING t.id, t.name, t.headless_ttl_ms, (t.xmax = 0) AS inserted",
      pg::Params().Add(name).Add(
          static_cast<std::int64_t>(config.headless_ttl.count())));
  TopicInfo topic = ParseTopic(r.get(), 0);
  if (pg::Bool(r.get(), 0, 3)) {
    pg::ExecScript(session.conn, kOp, TopicBaseline(core, topic.id));
    pg::Exec(session, kOp,
             "INSERT INTO " + core.schema() +
                 ".schema_version (topic_id, version) VALUES ($1, $2)",
             pg::Params().Add(topic.id).Add(kTopicBaselineVersion));
    pg::Exec(session, kOp,
             "INSERT INTO " + core.schema() +
                 ".janitor_state (topic_id) VALUES ($1)",
             pg::Params().Add(topic.id));
  } else {
    pg::Result v = pg::Exec(session, kOp,
                            "SELECT version FROM " + core.schema() +
                                ".schema_version WHERE topic_id = $1",
                            pg::Params().Add(topic.id));
    CheckTopicVersion(kOp, topic,
                      PQntuples(v.get()) == 0
                          ? 0
                          : static_cast<int>(pg::Int64(v.get(), 0, 0)));
  }
  NotifyTopicChange(core, session, name, "registered");
  tx.Commit();
  core.CacheTopic(topic);
  return topic;
}

void DestroyTopic(ClientCore& core, const std::string& name) {
  constexpr const char* kOp = "Destroy";
  ValidateTopicName(kOp, name);
  Tx tx = BeginTx(core);
  const pg::Session session = tx.state().session();
  pg::Result r = pg::Exec(
      session, kOp,
      "DELETE FROM " + core.schema() + ".topic WHERE name = $1 RETURNING id",
      pg::Params().Add(name));
  if (PQntuples(r.get()) == 0) throw TopicNotFound(kOp, name);
  const std::int64_t id = pg::Int64(r.get(), 0, 0);
  pg::ExecScript(session.conn, kOp,
                 "DROP TABLE " + core.HeadTable(id) + ", " +
                     core.MessageTable(id));
  NotifyTopicChange(core, session, name, "destroyed");
  tx.Commit();
  core.ForgetTopic(name);
}

TopicInfo FindTopic(ClientCore& core, const std::string& name) {
  TopicInfo topic = WithConnection(core, "FindTopic", [&](pg::Session s) {
    return ResolveTopic(core, s, "FindTopic", name);
  });
  core.CacheTopic(topic);
  return topic;
}

}  // namespace compaction::detail

namespace compaction {

std::vector<TopicInfo> Client::ListTopics() const {
  return detail::WithConnection(*core_, "ListTopics", [&](pg::Session s) {
    pg::Result r;
    try {
      r = pg::Exec(s, "ListTopics",
                   "SELECT id, name, headless_ttl_ms FROM " + core_->schema() +
                       ".topic ORDER BY name");
    } catch (const DatabaseError& e) {
      detail::RethrowSchemaMissing(*core_, "ListTopics", e);
    }
    std::vector<TopicInfo> out;
    for (int row = 0; row < PQntuples(r.get()); ++row) {
      out.push_back(detail::ParseTopic(r.get(), row));
    }
    return out;
  });
}

}  // namespace compaction
