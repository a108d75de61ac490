// Helpers over libpq's conninfo parser (keyword/value strings and URIs).
// Pure functions; thread-safe.
#pragma once

#include <map>
#include <string>

namespace compactiond {

// True when `conninfo` sets a non-empty password (keyword or URI user:pass@).
// An unparsable conninfo counts as not carrying one; libpq reports it later.
bool ConninfoHasPassword(const std::string& conninfo);

// `conninfo` with any password replaced by "********", for display. An
// unparsable string is shown as "<unparsable conninfo>" because it could
// hide a password in any shape.
std::string MaskConninfo(const std::string& conninfo);

// Parses `conninfo` into keyword → value (only set keywords), then applies
// `overrides`. Throws std::invalid_argument with libpq's message when the
// string does not parse.
std::map<std::string, std::string> ConninfoParams(
    const std::string& conninfo,
    const std::map<std::string, std::string>& overrides = {});

// Renders params as a keyword/value conninfo string with proper quoting.
std::string RenderConninfo(const std::map<std::string, std::string>& params);

}  // namespace compactiond
