// The settings' sources other than flags: the COMPACTIOND_* environment
// and the config file; and the whole invocation, every source merged by
// precedence.
#include <sys/stat.h>

#include <cctype>
#include <sstream>

#include "daemon/config_file.hpp"
#include "daemon/config_parse.hpp"
#include "daemon/conninfo.hpp"
#include "daemon/suggest.hpp"

namespace po = boost::program_options;

namespace compactiond {
namespace {

using namespace detail;  // NOLINT

constexpr const char* kEnvPrefix = "COMPACTIOND_";

// COMPACTIOND_POOL_SIZE → pool-size; "" (ignored) for anything not a key.
std::string EnvToKey(const std::string& var) {
  std::string prefix = kEnvPrefix;
  if (var.rfind(prefix, 0) != 0) return "";
  for (const SettingSpec& spec : SettingTable()) {
    if (EnvName(spec.name) == var) return spec.name;
  }
  return "";
}

std::string Same(const std::string& key) { return key; }

Values ToValues(const po::parsed_options& parsed) {
  Values out;
  for (const auto& o : parsed.options) {
    if (o.unregistered || o.value.empty()) continue;
    out[o.string_key] = o.value.back();
  }
  return out;
}

std::string TrimSpace(const std::string& s) {
  const char* ws = " \t\r\n";
  size_t first = s.find_first_not_of(ws);
  if (first == std::string::npos) return "";
  return s.substr(first, s.find_last_not_of(ws) - first + 1);
}

// Boost.Program_options' parse_config_file quotes a line it cannot parse,
// and the line may hold a password. So the file is read here with the same
// rules ('#' starts a comment anywhere, whitespace trimmed, "[section]"
// prefixes the keys after it, "key = value", the last value of a key wins)
// and a bad line is reported by its number only.
Values ParseFile(const std::string& path) {
  std::istringstream in(ReadConfigFile(path));
  const std::string where = "config file '" + path + "' line ";
  Values out;
  std::string prefix;
  std::string raw;
  for (int number = 1; std::getline(in, raw); ++number) {
    const std::string line = TrimSpace(raw.substr(0, raw.find('#')));
    if (line.empty()) continue;
    if (line.front() == '[' && line.back() == ']') {
      prefix = line.substr(1, line.size() - 2);
      if (prefix.empty() || prefix.back() != '.') prefix += '.';
      continue;
    }
    const size_t eq = line.find('=');
    if (eq == std::string::npos) {
      throw ConfigError(where + std::to_string(number) +
                        ": expected 'key = value' (line not shown: it may "
                        "hold a secret)");
    }
    const std::string name = prefix + TrimSpace(line.substr(0, eq));
    if (!IsSettingKey(name)) {
      throw ConfigError(where + std::to_string(number) + ": unknown key" +
                        (LooksLikeKey(name)
                             ? " '" + name + "'" + DidYouMeanSetting(name, Same)
                             : ""));
    }
    out[name] = TrimSpace(line.substr(eq + 1));
  }
  return out;
}

// Mode bits of `path` when group or others may read it, for the warning
// about a secret in the config file.
std::optional<unsigned> ReadableByOthers(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return std::nullopt;
  if ((st.st_mode & (S_IRGRP | S_IROTH)) == 0) return std::nullopt;
  return static_cast<unsigned>(st.st_mode & 07777);
}

Values ParseEnvironment() {
  RefuseUnknownVariables();
  try {
    return ToValues(po::parse_environment(SettingsOptions(), EnvToKey));
  } catch (const po::error& e) {
    throw ConfigError(std::string("environment: ") + e.what());
  }
}

// Whether the config file holds a secret that group or others may read.
std::optional<unsigned> ExposedSecretMode(const std::string& path,
                                          const Values& file) {
  for (const auto& [key, value] : file) {
    if (IsSecretKey(key) && ConninfoHasSecret(value)) {
      return ReadableByOthers(path);
    }
  }
  return std::nullopt;
}

}  // namespace

std::string EnvName(const std::string& key) {
  std::string out = kEnvPrefix;
  for (char c : key) {
    out.push_back(c == '-' ? '_' : static_cast<char>(std::toupper(c)));
  }
  return out;
}

Invocation ParseInvocation(const std::vector<std::string>& args) {
  Invocation inv;
  Values flags = ReadCommandLine(args, inv);
  if (inv.help || inv.version) return inv;
  Values env = ParseEnvironment();
  Values file = inv.config_file.empty() ? Values{} : ParseFile(inv.config_file);
  if (!file.empty()) {
    inv.exposed_secret_mode = ExposedSecretMode(inv.config_file, file);
  }

  const Settings defaults;
  Values effective;  // key → its value as given, for relation errors
  for (const SettingSpec& spec : SettingTable()) {
    // Highest precedence first: the first source holding the key wins.
    const std::string& key = spec.name;
    Source source = Source::kDefault;
    if (flags.count(key) != 0) {
      effective[key] = flags[key];
      source = Source::kFlag;
    } else if (env.count(key) != 0) {
      effective[key] = env[key];
      source = Source::kEnvironment;
    } else if (file.count(key) != 0) {
      effective[key] = file[key];
      source = Source::kFile;
    }
    inv.sources[key] = source;
    if (source == Source::kDefault) {
      effective[key] = spec.format(defaults);
    } else {
      spec.parse(inv.settings, effective[key]);
    }
  }
  CheckRelations(inv.settings, effective);
  CheckSweepPacing(inv.settings, effective);
  return inv;
}

}  // namespace compactiond
