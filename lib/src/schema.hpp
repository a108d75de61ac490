#pragma once

#include <optional>
#include <string>

#include "core.hpp"

namespace compaction::detail {

// The recorded system baseline version; nullopt when the schema is not
// installed, 0 when installed without a version row.
std::optional<int> InstalledSystemVersion(ClientCore& core, pg::Session session,
                                          const char* operation);
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
