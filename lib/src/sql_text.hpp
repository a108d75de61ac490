// The SQL baselines of sql/, embedded at build time (cmake/EmbedSql.cmake).
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>

namespace compaction::sql {
extern const std::string_view k_system_v1;
extern const std::string_view k_topic_v1;

// A baseline with its placeholders ({schema}, {id}) replaced.
inline std::string Render(
    std::string_view text,
    std::initializer_list<std::pair<std::string_view, std::string>> values) {
  std::string out(text);
  for (const auto& [token, value] : values) {
    for (std::size_t at = out.find(token); at != std::string::npos;
         at = out.find(token, at + value.size())) {
      out.replace(at, token.size(), value);
    }
  }
  return out;
}
}  // namespace compaction::sql
