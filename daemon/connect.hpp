// How the daemon's settings become libpq connection parameters.
//
// The client's sessions get `-c statement_timeout=<stats-timeout>` in their
// libpq `options` (appended to any the user set, or to PGOPTIONS), so the
// statistics and topic queries are bounded on the server; janitor batches
// set their own statement-timeout. `connect_timeout` defaults to 10 s unless
// the conninfo or PGCONNECT_TIMEOUT sets one, so a dead host cannot hold a
// worker for minutes. Pure functions; thread-safe.
#pragma once

#include <map>
#include <string>

#include <compaction/options.hpp>

#include "daemon/config.hpp"

namespace compactiond {

// Keyword → value for libpq. Throws ConfigError naming `db` when the
// conninfo does not parse.
std::map<std::string, std::string> ConnectionParams(const Settings& s);

// The conninfo string handed to compaction::Client::Connect.
std::string ClientConninfo(const Settings& s);

compaction::ClientOptions ClientOptionsFor(const Settings& s);

}  // namespace compactiond
