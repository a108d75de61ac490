// What the configuration's files share (config.cpp: the settings table;
// config_values.cpp: the parsers; config_flags.cpp: the command line and
// --help; config_sources.cpp: environment, file and their merge). Private
// to them; the rest of the daemon includes config.hpp.
#pragma once

#include <boost/program_options.hpp>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "daemon/config.hpp"

namespace compactiond::detail {

// Setting key → its text as a source gave it.
using Values = std::map<std::string, std::string>;

// --- the table (config.cpp)
const SettingSpec* FindSetting(const std::string& name);
bool IsSettingKey(const std::string& name);
// Keys whose value can hold a secret, and so is never quoted.
bool IsSecretKey(const std::string& key);

// --- parsers (config_values.cpp): text to a value within bounds, or a
// ConfigError naming the key
[[noreturn]] void Invalid(const std::string& key, const std::string& value,
                          const std::string& why);
std::int64_t ToInt64(const std::string& key, const std::string& v,
                     std::int64_t lo, std::int64_t hi);
int ToInt(const std::string& key, const std::string& v, int lo, int hi);
Millis ToTtl(const std::string& key, const std::string& v);
Millis ToRetention(const std::string& key, const std::string& v);
Millis ToTimer(const std::string& key, const std::string& v);
Millis ToPause(const std::string& key, const std::string& v);
Millis ToServerTimeout(const std::string& key, const std::string& v);
double ToFraction(const std::string& key, const std::string& v);
double ToNumber(const std::string& key, const std::string& v);
// The sweeps' claim owner: at most this many bytes of printable UTF-8.
inline constexpr size_t kMaxOwnerBytes = 200;
std::string ToOwner(const std::string& key, const std::string& v);
std::string ToConninfo(const std::string& key, const std::string& v);
std::string ToIdentifier(const std::string& key, const std::string& v);
std::string ToSchema(const std::string& key, const std::string& v);
std::string ToListen(const std::string& key, const std::string& v);
bool ToBool(const std::string& key, const std::string& v);
LogLevel ToLogLevel(const std::string& key, const std::string& v);
MetricsDetail ToMetricsDetail(const std::string& key, const std::string& v);

// An integer parser bounded to [lo, hi], typed as the member it fills.
template <typename T>
auto IntIn(T lo, T hi) {
  return [lo, hi](const std::string& key, const std::string& v) {
    return static_cast<T>(ToInt64(key, v, lo, hi));
  };
}

// The relations between settings (max above min, ...), once all are read.
void CheckRelations(const Settings& s, const Values& effective);
void CheckSweepPacing(const Settings& s, const Values& effective);

// --- the command line (config_flags.cpp)
// The settings as options without defaults, so that "absent" stays visible
// per source (flags, environment).
boost::program_options::options_description SettingsOptions();
// Fills `inv`'s command words, options and config file from `args`; returns
// the settings given as flags (none with --help or --version). A conninfo
// with a secret is refused.
Values ReadCommandLine(const std::vector<std::string>& args, Invocation& inv);

}  // namespace compactiond::detail
