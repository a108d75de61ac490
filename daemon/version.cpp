#include "daemon/version.hpp"

#ifndef COMPACTIOND_VERSION
#define COMPACTIOND_VERSION "0.0.0-unknown"
#endif

namespace compactiond {
const char* Version() { return COMPACTIOND_VERSION; }
}  // namespace compactiond
