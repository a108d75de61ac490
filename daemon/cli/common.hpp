// What the one-shot subcommands share: their database connection and how
// they print durations, timestamps and retentions (in tables and JSON).
//
// Thread safety: free functions without state.
#pragma once

#include <chrono>
#include <compaction/client.hpp>
#include <compaction/errors.hpp>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

#include "daemon/config.hpp"

namespace compactiond::cli {

// One client for the command, configured as `run` configures its own.
compaction::Client Connect(const Settings& s);

// Runs `fn`; a refusal for want of privilege (insufficient_privilege) is
// rethrown as std::runtime_error saying that `command` needs the role that
// owns the schema's tables: the app, janitor and monitor roles may not
// drop tables or delete consumer positions, by design.
template <class F>
decltype(auto) AsTableOwner(const char* command, F&& fn) {
  try {
    return std::forward<F>(fn)();
  } catch (const compaction::DatabaseError& e) {
    if (e.sqlstate() != compaction::kInsufficientPrivilege) throw;
    throw std::runtime_error(std::string(e.what()) + " (" + command +
                             " needs the role that owns the schema's "
                             "tables, e.g. <prefix>_owner of schema install "
                             "--roles)");
  }
}

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

// True when Printable would escape nothing but backslashes: printable
// ASCII and well-formed UTF-8 without C1 controls. What a configured name
// (schema, owner) must be, since PostgreSQL refuses text that is not
// UTF-8 (22021) and logs and tables would show it escaped.
bool IsPrintable(std::string_view text);

}  // namespace compactiond::cli
