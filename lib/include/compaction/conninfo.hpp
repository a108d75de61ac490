// libpq connection strings (keyword/value or URI) parsed, masked and
// rendered by the library, so a program built on it needs no libpq of its
// own to handle the conninfo it passes to Client::Connect. Pure functions
// (they read no environment); thread-safe.
#pragma once

#include <map>
#include <string>
#include <string_view>

#include "compaction/export.hpp"

namespace compaction {

// libpq keyword -> value, as Client::Connect and TopicEventListener take it.
using ConnParams = std::map<std::string, std::string>;

// The keywords `conninfo` sets (only those). Throws InvalidArgument, which
// never quotes the string (libpq's parse error can quote a password), when
// it does not parse. An empty string sets nothing.
COMPACTION_EXPORT ConnParams ParseConninfo(const std::string& conninfo);

// The keywords whose values are secrets: `password` (also a URI's
// user:pass@) and `sslpassword` (the client key's passphrase).
COMPACTION_EXPORT bool IsSecretConninfoKeyword(std::string_view keyword);

// `params` as a keyword/value conninfo string, every value quoted.
COMPACTION_EXPORT std::string RenderConninfo(const ConnParams& params);

// `conninfo` rendered with every secret (even an empty one) replaced by
// "********", for display; "<unparsable conninfo>" when it does not parse,
// since a secret could then hide in any shape.
COMPACTION_EXPORT std::string MaskConninfo(const std::string& conninfo);

}  // namespace compaction
