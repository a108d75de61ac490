// The SQL baselines of sql/, embedded at build time (cmake/EmbedSql.cmake).
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>

namespace compaction::sql {
extern const std::string_view k_system_v1;
extern const std::string_view k_topic_v1;
extern const std::string_view k_roles_v1;
extern const std::string_view k_citus_v1;
extern const std::string_view k_citus_topic_v1;

// A baseline with its placeholders ({schema}, {id}) replaced, in one pass
// over `text`: a value is never scanned again, so a schema name that itself
// contains "{id}" stays what it is instead of being rewritten.
inline std::string Render(
    std::string_view text,
    std::initializer_list<std::pair<std::string_view, std::string>> values) {
  std::string out;
  out.reserve(text.size());
  std::size_t at = 0;
  while (at < text.size()) {
    bool replaced = false;
    if (text[at] == '{') {
      for (const auto& [token, value] : values) {
        if (text.substr(at, token.size()) == token) {
          out += value;
          at += token.size();
          replaced = true;
          break;
        }
      }
    }
    if (!replaced) out += text[at++];
  }
  return out;
}
}  // namespace compaction::sql
