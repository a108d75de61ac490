#include "daemon/cli/common.hpp"

#include <compaction/options.hpp>

#include "daemon/conninfo.hpp"
#include "daemon/duration.hpp"

namespace compactiond::cli {

compaction::Client Connect(const Settings& s) {
  return compaction::Client::Connect(ConnectionParams(s), ClientOptionsFor(s));
}

double Seconds(Millis d) { return std::chrono::duration<double>(d).count(); }

nlohmann::json Timestamp(
    const std::optional<std::chrono::system_clock::time_point>& t) {
  if (!t) return nullptr;
  return std::chrono::duration<double>(t->time_since_epoch()).count();
}

nlohmann::json RetentionJson(Millis d) {
  if (d == compaction::kKeepForever) return nullptr;
  return Seconds(d);
}

std::string RetentionText(Millis d) {
  return d == compaction::kKeepForever ? "keep" : FormatDuration(d);
}

}  // namespace compactiond::cli
