#include "daemon/duration.hpp"

#include <cctype>
#include <cstdint>
#include <limits>

namespace compactiond {
namespace {

std::optional<std::int64_t> UnitMillis(std::string_view unit) {
  if (unit == "ms") return 1;
  if (unit == "s" || unit.empty()) return 1000;
  if (unit == "m" || unit == "min") return 60'000;
  if (unit == "h") return 3'600'000;
  if (unit == "d") return 86'400'000;
  return std::nullopt;
}

}  // namespace

std::optional<std::chrono::milliseconds> ParseDuration(std::string_view text) {
  if (text.empty()) return std::nullopt;
  std::int64_t total = 0;
  size_t i = 0;
  while (i < text.size()) {
    if (!std::isdigit(static_cast<unsigned char>(text[i]))) return std::nullopt;
    std::int64_t number = 0;
    while (i < text.size() &&
           std::isdigit(static_cast<unsigned char>(text[i]))) {
      if (number > std::numeric_limits<std::int64_t>::max() / 10 / 86'400'000) {
        return std::nullopt;  // far beyond any sensible setting
      }
      number = number * 10 + (text[i] - '0');
      ++i;
    }
    size_t unit_start = i;
    while (i < text.size() &&
           std::isalpha(static_cast<unsigned char>(text[i]))) {
      ++i;
    }
    std::string_view unit = text.substr(unit_start, i - unit_start);
    // A bare number is only accepted as the whole value ("30" = 30s).
    if (unit.empty() && !(unit_start == text.size() && total == 0)) {
      return std::nullopt;
    }
    auto scale = UnitMillis(unit);
    if (!scale) return std::nullopt;
    if (number > (std::numeric_limits<std::int64_t>::max() - total) / *scale) {
      return std::nullopt;  // the sum would overflow
    }
    total += number * *scale;
  }
  return std::chrono::milliseconds(total);
}

std::string FormatDuration(std::chrono::milliseconds d) {
  std::int64_t ms = d.count();
  if (ms == 0) return "0s";
  struct Unit {
    std::int64_t millis;
    const char* suffix;
  };
  for (Unit u : {Unit{86'400'000, "d"}, Unit{3'600'000, "h"}, Unit{60'000, "m"},
                 Unit{1000, "s"}}) {
    if (ms % u.millis == 0) return std::to_string(ms / u.millis) + u.suffix;
  }
  return std::to_string(ms) + "ms";
}

}  // namespace compactiond
