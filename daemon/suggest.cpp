#include "daemon/suggest.hpp"

#include <algorithm>

#include "daemon/config.hpp"

namespace compactiond {

int EditDistance(const std::string& a, const std::string& b) {
  // Optimal string alignment: three rows suffice for the transposition.
  const size_t n = b.size();
  std::vector<int> prev2(n + 1), prev(n + 1), row(n + 1);
  for (size_t j = 0; j <= n; ++j) prev[j] = static_cast<int>(j);
  for (size_t i = 1; i <= a.size(); ++i) {
    row[0] = static_cast<int>(i);
    for (size_t j = 1; j <= n; ++j) {
      const int cost = a[i - 1] == b[j - 1] ? 0 : 1;
      row[j] = std::min({prev[j] + 1, row[j - 1] + 1, prev[j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        row[j] = std::min(row[j], prev2[j - 2] + 1);
      }
    }
    prev2.swap(prev);
    prev.swap(row);
  }
  return prev[n];
}

std::optional<std::string> Closest(const std::string& given,
                                   const std::vector<std::string>& candidates) {
  const int limit = given.size() <= 4 ? 1 : given.size() <= 12 ? 2 : 3;
  std::optional<std::string> best;
  int best_distance = limit + 1;
  bool tie = false;
  for (const std::string& c : candidates) {
    const int d = EditDistance(given, c);
    if (d < best_distance) {
      best = c;
      best_distance = d;
      tie = false;
    } else if (d == best_distance) {
      tie = true;
    }
  }
  if (!best || tie) return std::nullopt;
  return best;
}

std::string DidYouMeanSetting(const std::string& key,
                              std::string (*format)(const std::string&)) {
  std::vector<std::string> names;
  for (const SettingSpec& spec : SettingTable()) names.push_back(spec.name);
  const auto close = Closest(key, names);
  if (!close) return "";
  return " (did you mean '" + format(*close) + "'?)";
}

}  // namespace compactiond
