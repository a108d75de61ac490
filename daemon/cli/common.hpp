// What the one-shot subcommands share: their database connection and how
// they print durations, timestamps and retentions (in tables and JSON).
//
// Thread safety: free functions without state.
#pragma once

#include <chrono>
#include <compaction/client.hpp>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "daemon/config.hpp"

namespace compactiond::cli {

// One client for the command, configured as `run` configures its own.
compaction::Client Connect(const Settings& s);

double Seconds(Millis d);
// Seconds since the Unix epoch; null when there is no time.
nlohmann::json Timestamp(
    const std::optional<std::chrono::system_clock::time_point>& t);
// A retention as seconds for JSON; kKeepForever is null.
nlohmann::json RetentionJson(Millis d);
// A retention for people: "keep" or a duration.
std::string RetentionText(Millis d);

// Text from the database (topic names, last errors, claim owners) as a
// table cell or plain-output field: control characters (C0, DEL, C1) and
// bytes that are not UTF-8 written as \xNN (\n, \r, \t as such) and a
// backslash as \\, so a row planted by another role can neither move the
// terminal's cursor nor forge a line. JSON output escapes on its own.
std::string Printable(std::string_view text);

}  // namespace compactiond::cli
