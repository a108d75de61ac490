// The daemon's connection parameters: libpq conninfo strings and URIs
// parsed and masked for display (by the library: compaction/conninfo.hpp), and
// the settings turned into the keyword -> value parameters the library's Client
// and TopicEventListener take (never rendered into a string and parsed again).
//
// The client's sessions get statement_timeout = stats-timeout as a session
// setting (ClientOptions::session_settings; it wins over one in the user's
// options or PGOPTIONS, which the library applies too), so the statistics
// and topic queries are bounded on the server; janitor batches set their
// own statement-timeout. The library adds the search_path pin,
// connect_timeout 10 s and TCP keepalives unless the conninfo sets them.
// Pure functions; thread-safe.
#pragma once

#include <compaction/options.hpp>
#include <map>
#include <string>

#include "daemon/config.hpp"

namespace compactiond {

// The libpq keywords whose values are secrets: `password` (also a URI's
// user:pass@) and `sslpassword` (the client key's passphrase; also a URI's
// ?sslpassword=). Neither may appear on argv, in output or in a log line.
bool IsSecretKeyword(const std::string& keyword);

// True when `conninfo` sets a non-empty secret (see IsSecretKeyword). An
// unparsable conninfo counts as not carrying one; the caller refuses it
// anyway, without echoing it.
bool ConninfoHasSecret(const std::string& conninfo);

// `conninfo` with every secret replaced by "********", for display. An
// unparsable string is shown as "<unparsable conninfo>" because it could
// hide a secret in any shape.
std::string MaskConninfo(const std::string& conninfo);

// Parses `conninfo` into keyword → value (only set keywords), then applies
// `overrides`. Throws std::invalid_argument (not quoting the string) when
// it does not parse.
std::map<std::string, std::string> ConninfoParams(
    const std::string& conninfo,
    const std::map<std::string, std::string>& overrides = {});

// Renders params as a keyword/value conninfo string with proper quoting.
std::string RenderConninfo(const std::map<std::string, std::string>& params);

// Keyword -> value for libpq, for compaction::Client::Connect and the
// listener. Throws ConfigError naming `db` when the conninfo does not parse.
std::map<std::string, std::string> ConnectionParams(const Settings& s);

// With notice_handler = LogNotices("postgres") and session_settings
// {statement_timeout: stats-timeout in ms}.
compaction::ClientOptions ClientOptionsFor(const Settings& s);

// Logs the server's notices (component `component`): warnings and worse
// (a shutdown's "terminating connection" is FATAL) at warn, the rest at
// debug. libpq would print them raw on stderr.
compaction::NoticeHandler LogNotices(std::string component);

}  // namespace compactiond
