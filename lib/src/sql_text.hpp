// The SQL baselines of sql/, embedded at build time (cmake/EmbedSql.cmake).
#pragma once

#include <string_view>

namespace compaction::sql {
extern const std::string_view k_system_v1;
extern const std::string_view k_topic_v1;
}  // namespace compaction::sql
