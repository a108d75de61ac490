// An operator's tasks on a consumer (Client::ResetConsumer, DropConsumer):
// every partition's position at once, in one statement.
#include <cstdlib>

#include "compaction/client.hpp"
#include "consume_read.hpp"
#include "core.hpp"
#include "validate.hpp"

namespace compaction {

int Client::ResetConsumer(const std::string& topic, const std::string& consumer,
                          bool to_end) {
  constexpr const char* kOp = "ResetConsumer";
  detail::ValidateTopicName(kOp, topic);
  detail::ValidateConsumerName(kOp, consumer);
  // To the start: a done snapshot in which no transaction is visible (3 is
  // the first normal xid), so every message is delivered again. To the end:
  // what is committed now is consumed; a transaction in progress is not,
  // as after a Poll. The cursor goes with the window it walked.
  const std::string done =
      to_end ? detail::kWindowSnapshotSql : "'3:3:'::pg_snapshot";
  return detail::WithConnection(*core_, kOp, [&](pg::Session s) {
    const pg::Result r = pg::Exec(
        s, kOp,
        "UPDATE " + core_->schema() +
            ".consumer_position p SET done_snapshot = " + done +
            ", read_snapshot = NULL, cursor_xid = NULL, cursor_id = NULL "
            "FROM " +
            core_->schema() +
            ".topic t WHERE t.id = p.topic_id AND t.name = $1::text AND "
            "p.consumer = $2::text",
        pg::Params().Add(topic).Add(consumer));
    return r.AffectedRows();
  });
}

int Client::DropConsumer(const std::string& topic,
                         const std::string& consumer) {
  constexpr const char* kOp = "DropConsumer";
  detail::ValidateTopicName(kOp, topic);
  detail::ValidateConsumerName(kOp, consumer);
  return detail::WithConnection(*core_, kOp, [&](pg::Session s) {
    const pg::Result r = pg::Exec(
        s, kOp,
        "DELETE FROM " + core_->schema() + ".consumer_position p USING " +
            core_->schema() +
            ".topic t WHERE t.id = p.topic_id AND t.name = $1::text AND "
            "p.consumer = $2::text",
        pg::Params().Add(topic).Add(consumer));
    return r.AffectedRows();
  });
}

}  // namespace compaction
