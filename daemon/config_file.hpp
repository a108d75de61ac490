// Reading the config file: a regular file of bounded size, so that a path
// pointing at a device, a FIFO or a huge file is a clear error instead of
// a read that blocks or fills memory.
#pragma once

#include <cstddef>
#include <string>

namespace compactiond {

// The largest config file read (1 MiB): a real one is a few kB.
constexpr std::size_t kMaxConfigFileBytes = 1 << 20;

// The whole text of `path`, or a ConfigError when it is not a regular file
// (after symlinks; /dev/null reads as empty), is larger than
// kMaxConfigFileBytes, or cannot be read. Opening never blocks (O_NONBLOCK: a
// FIFO without a writer is refused by its type, not waited for).
std::string ReadConfigFile(const std::string& path);

}  // namespace compactiond
