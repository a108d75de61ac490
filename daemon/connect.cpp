#include "daemon/connect.hpp"

#include <cstdlib>
#include <stdexcept>
#include <utility>

#include "daemon/conninfo.hpp"

namespace compactiond {

std::map<std::string, std::string> ConnectionParams(const Settings& s) {
  std::map<std::string, std::string> params;
  try {
    params = ConninfoParams(s.db);
  } catch (const std::invalid_argument& e) {
    throw ConfigError("invalid value for key 'db': " + std::string(e.what()));
  }
  std::string options = params.count("options") != 0 ? params["options"] : "";
  if (options.empty()) {
    if (const char* env = std::getenv("PGOPTIONS")) options = env;
  }
  if (!options.empty()) options += " ";
  options += "-c statement_timeout=" + std::to_string(s.stats_timeout.count());
  // The library pins search_path on its own connections; the listener's
  // connection (which only LISTENs) gets the same pin, so no session of the
  // daemon searches a schema another role can create objects in.
  options += " -c search_path=pg_catalog,pg_temp";
  params["options"] = options;
  if (params.count("connect_timeout") == 0 &&
      std::getenv("PGCONNECT_TIMEOUT") == nullptr) {
    params["connect_timeout"] = "10";
  }
  // statement_timeout is enforced by the server, so it cannot help when the
  // server drops off the network: TCP keepalives and a user timeout make a
  // dead peer an error within about half a minute, so compaction_up and
  // /readyz tell the truth. Settings the user gave win.
  for (const auto& [key, value] :
       {std::pair<const char*, const char*>{"keepalives_idle", "10"},
        {"keepalives_interval", "5"},
        {"keepalives_count", "3"},
        {"tcp_user_timeout", "30000"}}) {
    if (params.count(key) == 0) params[key] = value;
  }
  params["application_name"] = s.application_name;
  return params;
}

std::string ClientConninfo(const Settings& s) {
  return RenderConninfo(ConnectionParams(s));
}

compaction::ClientOptions ClientOptionsFor(const Settings& s) {
  compaction::ClientOptions options;
  options.schema = s.schema;
  options.pool_size = s.pool_size;
  options.application_name = s.application_name;
  return options;
}

}  // namespace compactiond
