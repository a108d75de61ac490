#include "pg/conninfo.hpp"

#include <libpq-fe.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <string_view>

#include "compaction/errors.hpp"

namespace compaction::pg {

ConnParams ParseConninfo(const std::string& conninfo, const char* operation) {
  // libpq's parse errors quote the offending text, which can be a password:
  // say only that it is wrong.
  char* parse_error = nullptr;
  PQconninfoOption* parsed = PQconninfoParse(conninfo.c_str(), &parse_error);
  PQfreemem(parse_error);
  if (parsed == nullptr) {
    throw InvalidArgument(
        operation, "conninfo is not a valid libpq connection string or URI");
  }
  ConnParams params;
  for (PQconninfoOption* o = parsed; o->keyword != nullptr; ++o) {
    if (o->val != nullptr) params[o->keyword] = o->val;
  }
  PQconninfoFree(parsed);
  return params;
}

Environment Environment::OfProcess() {
  Environment env;
  if (const char* options = std::getenv("PGOPTIONS")) env.pgoptions = options;
  env.connect_timeout = std::getenv("PGCONNECT_TIMEOUT") != nullptr;
  return env;
}

namespace {

// What every connection the library opens gets unless the caller's conninfo
// says otherwise: a dead peer becomes an error within about half a minute
// instead of a ROLLBACK that hangs for the kernel's two hours.
constexpr std::pair<const char*, const char*> kConnectionDefaults[] = {
    {"connect_timeout", "10"},     {"keepalives_idle", "10"},
    {"keepalives_interval", "5"},  {"keepalives_count", "3"},
    {"tcp_user_timeout", "30000"},
};

// Setting names compare as the server does: any letter case.
bool SameName(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i]))) {
      return false;
    }
  }
  return true;
}

SettingList PinnedList() {
  SettingList pins;
  for (const auto& [name, value] : kPinnedSettings)
    pins.emplace_back(name, value);
  return pins;
}

}  // namespace

bool IsPinnedSetting(const std::string& name) {
  if (SameName(name, "client_encoding")) return true;
  for (const auto& pin : kPinnedSettings) {
    if (SameName(name, pin.first)) return true;
  }
  return false;
}

bool IsSettingName(const std::string& name) {
  if (name.empty()) return false;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                    (c >= '0' && c <= '9') || c == '_' || c == '.';
    if (!ok) return false;
  }
  return true;
}

std::string CallerOptions(const ConnParams& params, const Environment& env) {
  const auto it = params.find("options");
  if (it != params.end() && !it->second.empty()) return it->second;
  return env.pgoptions;
}

std::string RenderSettings(const SettingList& settings) {
  std::string out;
  for (const auto& [name, value] : settings) {
    if (!out.empty()) out += ' ';
    out += "-c " + name + '=';
    // The server splits on unescaped white space (isspace) and takes the
    // character after a backslash literally.
    for (char c : value) {
      if (c == '\\' || std::isspace(static_cast<unsigned char>(c))) {
        out += '\\';
      }
      out += c;
    }
  }
  return out;
}

ConnParams ForConnection(ConnParams params, const SessionSettings& settings,
                         const Environment& env) {
  // Every other role is untrusted: with pg_catalog first (and nothing else
  // searched for functions and operators), no object anyone created in
  // public or in a schema of a database-level search_path can stand in for
  // a built-in one inside our statements. The pins come last, so they win
  // over the caller's search_path (or isolation).
  std::string options = CallerOptions(params, env);
  for (const std::string& part :
       {RenderSettings({settings.begin(), settings.end()}),
        RenderSettings(PinnedList())}) {
    if (part.empty()) continue;
    if (!options.empty()) options += ' ';
    options += part;
  }
  params["options"] = options;
  // Keys and payloads travel as UTF-8 whatever the database's encoding:
  // the libpq keyword overrides a client_encoding of the conninfo or
  // PGCLIENTENCODING, and PgBouncer applies it to every server connection
  // it hands out; LocalSettingsSql repeats it per transaction.
  params["client_encoding"] = kClientEncoding;
  for (const auto& [key, value] : kConnectionDefaults) {
    const bool from_env =
        std::string_view(key) == "connect_timeout" && env.connect_timeout;
    if (params.count(key) == 0 && !from_env) params[key] = value;
  }
  return params;
}

namespace {

// The words of an options string as the server splits it: on unescaped
// white space, a backslash taking the next character literally.
std::vector<std::string> SplitOptions(const std::string& options) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;
  for (std::size_t i = 0; i < options.size(); ++i) {
    const char c = options[i];
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      if (in_word) words.push_back(std::move(word));
      word.clear();
      in_word = false;
      continue;
    }
    in_word = true;
    if (c == '\\' && i + 1 < options.size()) {
      word.push_back(options[++i]);
    } else {
      word.push_back(c);
    }
  }
  if (in_word) words.push_back(std::move(word));
  return words;
}

// `literal` as a SQL string literal that reads the same whatever
// standard_conforming_strings is.
std::string SqlLiteral(const std::string& value) {
  std::string out;
  bool backslash = false;
  for (char c : value) {
    if (c == '\'') out.push_back('\'');
    if (c == '\\') {
      out.push_back('\\');
      backslash = true;
    }
    out.push_back(c);
  }
  return (backslash ? "E'" : "'") + out + "'";
}

}  // namespace

SettingList OptionSettings(const std::string& options, const char* operation) {
  const std::vector<std::string> words = SplitOptions(options);
  SettingList settings;
  for (std::size_t i = 0; i < words.size(); ++i) {
    std::string setting;
    if (words[i] == "-c" && i + 1 < words.size()) {
      setting = words[++i];
    } else if (words[i].starts_with("-c") && words[i].size() > 2) {
      setting = words[i].substr(2);
    } else if (words[i].starts_with("--")) {
      setting = words[i].substr(2);
    }
    const std::size_t eq = setting.find('=');
    std::string name = setting.substr(0, eq);
    for (char& c : name) {
      if (c == '-') c = '_';
    }
    if (eq == std::string::npos || !IsSettingName(name)) {
      throw InvalidArgument(
          operation,
          "the connection's options (conninfo or PGOPTIONS) hold something "
          "other than -c name=value settings, which cannot be applied per "
          "transaction (prepared_statements = false)");
    }
    settings.emplace_back(std::move(name), setting.substr(eq + 1));
  }
  return settings;
}

std::string LocalSettingsSql(const ConnParams& params,
                             const SessionSettings& settings,
                             const char* operation, const Environment& env) {
  SettingList all;
  SettingList later(settings.begin(), settings.end());
  for (SettingList pins = PinnedList(); auto& pin : pins) {
    later.push_back(std::move(pin));
  }
  later.emplace_back("client_encoding", kClientEncoding);
  // The caller's own ones first, unless set again below: the last one of a
  // name wins, as in the startup options.
  for (auto& setting : OptionSettings(CallerOptions(params, env), operation)) {
    const bool again = std::any_of(
        later.begin(), later.end(),
        [&](const auto& l) { return SameName(l.first, setting.first); });
    if (!again) all.push_back(std::move(setting));
  }
  all.insert(all.end(), later.begin(), later.end());
  std::string sql;
  for (const auto& [name, value] : all) {
    sql += sql.empty() ? "SELECT " : ", ";
    sql += "pg_catalog.set_config(" + SqlLiteral(name) + ", " +
           SqlLiteral(value) + ", true)";
  }
  return sql;
}

ParamArrays::ParamArrays(const ConnParams& params) {
  for (const auto& [key, value] : params) {
    keywords.push_back(key.c_str());
    values.push_back(value.c_str());
  }
  keywords.push_back(nullptr);
  values.push_back(nullptr);
}

}  // namespace compaction::pg
