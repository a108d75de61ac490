// The daemon's version, from the CMake project version.
#pragma once

namespace compactiond {
const char* Version();
}  // namespace compactiond
