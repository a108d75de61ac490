#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "core.hpp"

namespace compaction::detail {

// Fingerprints of this build's baselines: 64-bit FNV-1a of the embedded SQL
// text, as 16 hex digits. The system one covers sql/topic_v1.sql too, which
// the system baseline embeds for register_topic. Pre-v1 a baseline changes
// in place under the same version number; the fingerprint tells the builds
// apart.
// The deployment profiles: one PostgreSQL, or a Citus cluster (the
// distributed layout of sql/citus_v1.sql). schema_version records which.
enum class Profile { kSingle, kCitus };

// The Citus fingerprint covers sql/citus_v1.sql and sql/citus_topic_v1.sql
// as well.
const std::string& SystemFingerprint(Profile profile = Profile::kSingle);
const std::string& TopicFingerprint();

// The recorded system baseline version; nullopt when the schema is not
// installed, 0 when installed without a version row. When the version is
// this build's but the recorded fingerprint is not (or is missing), throws
// SchemaVersionMismatch saying to recreate the database; when the recorded
// profile is not the database's (the citus extension created after the
// install, or dropped), SchemaProfileMismatch.
std::optional<int> InstalledSystemVersion(ClientCore& core, pg::Session session,
                                          const char* operation);

// Throws SchemaVersionMismatch unless the system baseline this build
// expects (version and fingerprint) is installed.
void RequireSystemBaseline(ClientCore& core, pg::Session session,
                           const char* operation);

// Throws SchemaVersionMismatch unless a topic's recorded baseline (version
// 0: none recorded; fingerprint nullopt: none recorded) is this build's.
// Builds no string when it is: every transaction's look-up checks it.
void CheckTopicBaseline(const char* operation, const std::string& topic_name,
                        int version,
                        std::optional<std::string_view> fingerprint);
void InstallSchema(ClientCore& core);

// Creates (when missing) the roles of sql/roles_v1.sql named
// `<prefix>_owner`, `_app`, `_janitor` and `_monitor` (`prefix` empty: the
// schema name), hands the schema and its objects to the owner role and
// grants the others what they need, also on the tables of topics that
// exist already. Idempotent. Needs a superuser and the installed system
// baseline: throws SchemaVersionMismatch otherwise, InvalidArgument when a
// role name would not be 1-63 characters of a-z, 0-9, '_' starting with a
// letter or '_' (or would start with "pg_").
void InstallRoles(ClientCore& core, const std::string& prefix);

// The role names InstallRoles uses for `prefix` (empty: the schema name),
// validated as above. Exposed for tests and the daemon's messages.
struct RoleNames {
  std::string owner, app, janitor, monitor;
};
RoleNames RoleNamesFor(const ClientCore& core, const std::string& prefix);

}  // namespace compaction::detail
