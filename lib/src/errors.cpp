#include "compaction/errors.hpp"

namespace compaction {
namespace {
std::string Prefix(const std::string& operation, const std::string& message) {
  return operation + ": " + message;
}
}  // namespace

Error::Error(std::string operation, const std::string& message)
    : std::runtime_error(Prefix(operation, message)),
      operation_(std::move(operation)) {}

TopicNotFound::TopicNotFound(std::string operation,
                             const std::string& topic_name)
    : Error(std::move(operation),
            "topic \"" + topic_name + "\" is not registered"),
      topic_name_(topic_name) {}

SchemaVersionMismatch::SchemaVersionMismatch(std::string operation,
                                             const std::string& subject,
                                             int found, int expected)
    : Error(std::move(operation),
            found == 0
                ? subject + " is not installed (expected version " +
                      std::to_string(expected) + "; install the schema first)"
                : subject + " is at version " + std::to_string(found) +
                      ", this build expects version " +
                      std::to_string(expected) +
                      " (pre-v1 baselines change in place: recreate "
                      "the database)"),
      found_(found),
      expected_(expected) {}

namespace {
// A fingerprint as the database holds it: anything a DBA typed in, so
// shortened and without control characters.
std::string ShownFingerprint(const std::string& text) {
  if (text.empty()) return "none";
  std::string out;
  for (char c : text.substr(0, 64)) {
    out += (static_cast<unsigned char>(c) < 0x20) ? '?' : c;
  }
  return text.size() > 64 ? out + "..." : out;
}
}  // namespace

SchemaVersionMismatch::SchemaVersionMismatch(
    std::string operation, const std::string& subject, int version,
    const std::string& found_fingerprint,
    const std::string& expected_fingerprint)
    : Error(std::move(operation),
            subject + " was created by another build of baseline version " +
                std::to_string(version) + " (fingerprint " +
                ShownFingerprint(found_fingerprint) + ", this build's " +
                expected_fingerprint +
                "): pre-v1 baselines change in place without migrations: "
                "recreate the database"),
      found_(version),
      expected_(version) {}

SchemaVersionMismatch::SchemaVersionMismatch(std::string operation,
                                             Detail detail, int found,
                                             int expected)
    : Error(std::move(operation), detail.message),
      found_(found),
      expected_(expected) {}

namespace {
std::string ProfileText(const std::string& profile) {
  if (profile == "citus") return "a Citus cluster (profile citus)";
  if (profile == "single") return "one PostgreSQL (profile single)";
  return "an unknown profile";  // typed in by hand: not repeated
}
}  // namespace

SchemaProfileMismatch::SchemaProfileMismatch(std::string operation,
                                             const std::string& subject,
                                             int version,
                                             std::string installed_profile,
                                             std::string database_profile)
    : SchemaVersionMismatch(
          std::move(operation),
          Detail{
              subject + " was installed for " + ProfileText(installed_profile) +
              " but the database is " + ProfileText(database_profile) +
              (database_profile == "citus" ? " (it has the citus extension)"
                                           : " (it has no citus extension)") +
              ": the layouts differ; install into a new schema or "
              "recreate the database"},
          version, version),
      installed_profile_(std::move(installed_profile)),
      database_profile_(std::move(database_profile)) {}

MessageDecodeError::MessageDecodeError(std::string operation,
                                       std::int64_t message_id,
                                       const std::string& reason)
    : Error(std::move(operation), "message " + std::to_string(message_id) +
                                      " does not decode: " + reason),
      message_id_(message_id) {}

MessageSchemaVersionMismatch::MessageSchemaVersionMismatch(
    std::string operation, std::int64_t message_id, int stored_version,
    int expected_version)
    : MessageDecodeError(std::move(operation), message_id,
                         "stored schema version " +
                             std::to_string(stored_version) +
                             ", message type has schema version " +
                             std::to_string(expected_version)),
      stored_version_(stored_version),
      expected_version_(expected_version) {}

DatabaseError::DatabaseError(std::string operation, std::string sqlstate,
                             const std::string& message)
    : Error(std::move(operation),
            sqlstate.empty() ? message
                             : message + " (SQLSTATE " + sqlstate + ")"),
      sqlstate_(std::move(sqlstate)) {}

AuthenticationFailed::AuthenticationFailed(std::string operation,
                                           std::string sqlstate,
                                           std::string role,
                                           const std::string& message)
    : DatabaseError(std::move(operation), std::move(sqlstate), message),
      role_(std::move(role)) {}

}  // namespace compaction
