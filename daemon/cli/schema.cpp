// schema install [--roles [--role-prefix P]]
#include <compaction/compaction.hpp>
#include <iostream>

#include "daemon/cli/cli.hpp"
#include "daemon/cli/commands.hpp"
#include "daemon/cli/common.hpp"

namespace compactiond::cli {

int SchemaInstall(const Settings& s, bool roles,
                  const std::string& role_prefix) {
  compaction::Client client = Connect(s);
  client.InstallSchema();
  std::cout << "schema installed: " << s.schema << "\n";
  if (roles) {
    client.InstallRoles(role_prefix);
    const std::string p = role_prefix.empty() ? s.schema : role_prefix;
    std::cout << "roles installed: " << p << "_owner, " << p << "_app, " << p
              << "_janitor, " << p << "_monitor\n";
  }
  return kExitOk;
}

}  // namespace compactiond::cli
