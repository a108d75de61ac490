// Conninfo parsing, the one place libpq reads a connection string.
#pragma once

#include <string>

#include "compaction/conninfo.hpp"

namespace compaction::pg {

// libpq keyword -> value.
using ConnParams = compaction::ConnParams;

// The keywords a conninfo (keyword/value string or URI) sets; throws
// InvalidArgument, without quoting it, when it does not parse.
ConnParams ParseConninfo(const std::string& conninfo, const char* operation);

}  // namespace compaction::pg
