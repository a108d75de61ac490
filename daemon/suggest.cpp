#include "daemon/suggest.hpp"

#include <unistd.h>

#include <algorithm>
#include <cctype>

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

bool LooksLikeKey(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name) {
    const auto u = static_cast<unsigned char>(c);
    if (!std::isalnum(u) && c != '-' && c != '_' && c != '.') return false;
  }
  return true;
}

bool LooksLikeCommandWord(const std::string& word) {
  if (word.empty() || word.size() > 32) return false;
  return std::all_of(word.begin(), word.end(),
                     [](char c) { return (c >= 'a' && c <= 'z') || c == '-'; });
}

std::string DidYouMeanSetting(const std::string& key,
                              std::string (*format)(const std::string&)) {
  std::vector<std::string> names;
  for (const SettingSpec& spec : SettingTable()) names.push_back(spec.name);
  const auto close = Closest(key, names);
  if (!close) return "";
  return " (did you mean '" + format(*close) + "'?)";
}

namespace {

constexpr std::string_view kEnvPrefix = "COMPACTIOND_";

// COMPACTIOND_BACH_SIZE → bach-size, to compare with the keys.
std::string EnvToGuess(const std::string& var) {
  std::string out;
  for (char c : var.substr(kEnvPrefix.size())) {
    out.push_back(c == '_' ? '-' : static_cast<char>(std::tolower(c)));
  }
  return out;
}

bool IsSettingVariable(const std::string& var) {
  for (const SettingSpec& spec : SettingTable()) {
    if (EnvName(spec.name) == var) return true;
  }
  return false;
}

bool Printable(const std::string& name) {
  if (name.size() > 64) return false;
  for (char c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  }
  return true;
}

}  // namespace

void RefuseUnknownVariables() {
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry(*e);
    const std::string var = entry.substr(0, entry.find('='));
    if (!var.starts_with(kEnvPrefix) || var == "COMPACTIOND_CONFIG") continue;
    if (IsSettingVariable(var)) continue;
    std::string hint = DidYouMeanSetting(EnvToGuess(var), EnvName);
    // Kubernetes injects <SERVICE>_PORT and <SERVICE>_SERVICE_* for a
    // Service named compactiond.
    if (hint.empty() && (var.starts_with("COMPACTIOND_PORT") ||
                         var.starts_with("COMPACTIOND_SERVICE_"))) {
      hint = " (a Kubernetes service link? set enableServiceLinks: false)";
    }
    throw ConfigError("environment: unknown variable '" +
                      (Printable(var) ? var : std::string("COMPACTIOND_?")) +
                      "'" + hint +
                      "; every COMPACTIOND_* variable must name a setting "
                      "(see --help)");
  }
}

}  // namespace compactiond
