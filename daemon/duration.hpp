// Durations in configuration values: an integer with a unit, optionally
// several concatenated ("1h30m"): ms, s, m, h, d. A bare integer means
// seconds. Pure functions; thread-safe.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

namespace compactiond {

std::optional<std::chrono::milliseconds> ParseDuration(std::string_view text);

// The shortest exact rendering that ParseDuration reads back ("90s", "5m").
std::string FormatDuration(std::chrono::milliseconds d);

}  // namespace compactiond
