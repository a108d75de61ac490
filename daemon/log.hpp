// Structured logging: one line per event on stderr,
//   ts=2024-05-01T12:00:00.123456Z level=info component=scheduler msg="..." k=v
// Values are quoted when they contain spaces, quotes or '='. Callers never
// pass a password or a message payload as a field.
//
// Lifetime: process-wide. Thread safety: every function may be called from
// any thread; each line is written with one write(2), so lines never mix.
#pragma once

#include <concepts>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

namespace compactiond {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3 };

std::optional<LogLevel> ParseLogLevel(std::string_view text);
std::string_view LogLevelName(LogLevel level);
void SetLogLevel(LogLevel level);
bool LogEnabled(LogLevel level);

// One key=value field of a log line.
struct LogField {
  LogField(std::string_view k, std::string v) : key(k), value(std::move(v)) {}
  LogField(std::string_view k, const char* v) : key(k), value(v) {}
  LogField(std::string_view k, std::string_view v) : key(k), value(v) {}
  LogField(std::string_view k, bool v) : key(k), value(v ? "true" : "false") {}
  template <std::integral T>
  LogField(std::string_view k, T v) : key(k), value(std::to_string(v)) {}
  LogField(std::string_view k, double v);

  std::string_view key;
  std::string value;
};

void Log(LogLevel level, std::string_view component, std::string_view message,
         std::initializer_list<LogField> fields = {});

inline void LogDebug(std::string_view c, std::string_view m,
                     std::initializer_list<LogField> f = {}) {
  if (LogEnabled(LogLevel::kDebug)) Log(LogLevel::kDebug, c, m, f);
}
inline void LogInfo(std::string_view c, std::string_view m,
                    std::initializer_list<LogField> f = {}) {
  Log(LogLevel::kInfo, c, m, f);
}
inline void LogWarn(std::string_view c, std::string_view m,
                    std::initializer_list<LogField> f = {}) {
  Log(LogLevel::kWarn, c, m, f);
}
inline void LogError(std::string_view c, std::string_view m,
                     std::initializer_list<LogField> f = {}) {
  Log(LogLevel::kError, c, m, f);
}

}  // namespace compactiond
