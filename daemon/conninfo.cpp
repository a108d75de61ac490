#include "daemon/conninfo.hpp"

#include <libpq-fe.h>

#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <utility>

#include "daemon/log.hpp"

namespace compactiond {
namespace {

struct OptionsFree {
  void operator()(PQconninfoOption* o) const { PQconninfoFree(o); }
};
using OptionsPtr = std::unique_ptr<PQconninfoOption, OptionsFree>;

// Null when `conninfo` does not parse; libpq's error text is dropped
// because it can quote a password.
OptionsPtr Parse(const std::string& conninfo) {
  char* err = nullptr;
  OptionsPtr options(PQconninfoParse(conninfo.c_str(), &err));
  PQfreemem(err);
  return options;
}

std::string Quote(const std::string& value) {
  std::string out = "'";
  for (char c : value) {
    if (c == '\'' || c == '\\') out.push_back('\\');
    out.push_back(c);
  }
  out.push_back('\'');
  return out;
}

}  // namespace

bool IsSecretKeyword(const std::string& keyword) {
  return keyword == "password" || keyword == "sslpassword";
}

bool ConninfoHasSecret(const std::string& conninfo) {
  if (conninfo.empty()) return false;
  OptionsPtr options = Parse(conninfo);
  if (!options) return false;
  for (PQconninfoOption* o = options.get(); o->keyword != nullptr; ++o) {
    if (IsSecretKeyword(o->keyword) && o->val != nullptr && o->val[0] != '\0') {
      return true;
    }
  }
  return false;
}

std::string MaskConninfo(const std::string& conninfo) {
  if (conninfo.empty()) return "";
  try {
    auto params = ConninfoParams(conninfo);
    // Even an empty secret is masked: its length is nobody's business.
    for (auto& [keyword, value] : params) {
      if (IsSecretKeyword(keyword)) value = "********";
    }
    return RenderConninfo(params);
  } catch (const std::invalid_argument&) {
    return "<unparsable conninfo>";
  }
}

std::map<std::string, std::string> ConninfoParams(
    const std::string& conninfo,
    const std::map<std::string, std::string>& overrides) {
  std::map<std::string, std::string> params;
  if (!conninfo.empty()) {
    OptionsPtr options = Parse(conninfo);
    if (!options) {
      // Not libpq's message: it quotes the offending text, which can be a
      // password (an unescaped '%' in a URI's user:password@, say).
      throw std::invalid_argument("not a valid libpq conninfo or URI");
    }
    for (PQconninfoOption* o = options.get(); o->keyword != nullptr; ++o) {
      if (o->val != nullptr) params[o->keyword] = o->val;
    }
  }
  for (const auto& [k, v] : overrides) params[k] = v;
  return params;
}

std::string RenderConninfo(const std::map<std::string, std::string>& params) {
  std::string out;
  for (const auto& [k, v] : params) {
    if (!out.empty()) out.push_back(' ');
    out.append(k).append("=").append(Quote(v));
  }
  return out;
}

std::map<std::string, std::string> ConnectionParams(const Settings& s) {
  std::map<std::string, std::string> params;
  try {
    params = ConninfoParams(s.db);
  } catch (const std::invalid_argument& e) {
    throw ConfigError("invalid value for key 'db': " + std::string(e.what()));
  }
  std::string options = params.count("options") != 0 ? params["options"] : "";
  if (options.empty()) {
    if (const char* env = std::getenv("PGOPTIONS")) options = env;
  }
  if (!options.empty()) options += " ";
  options += "-c statement_timeout=" + std::to_string(s.stats_timeout.count());
  params["options"] = options;
  params["application_name"] = s.application_name;
  return params;
}

compaction::ClientOptions ClientOptionsFor(const Settings& s) {
  compaction::ClientOptions options;
  options.schema = s.schema;
  options.pool_size = s.pool_size;
  options.application_name = s.application_name;
  options.prepared_statements = s.prepared_statements;
  options.notice_handler = LogNotices("postgres");
  return options;
}

compaction::NoticeHandler LogNotices(std::string component) {
  return [component = std::move(component)](const compaction::Notice& n) {
    const bool loud = n.severity == "WARNING" || n.severity == "ERROR" ||
                      n.severity == "FATAL" || n.severity == "PANIC";
    const std::initializer_list<LogField> fields = {{"severity", n.severity},
                                                    {"sqlstate", n.sqlstate}};
    if (loud) {
      LogWarn(component, n.message, fields);
    } else {
      LogDebug(component, n.message, fields);
    }
  };
}

}  // namespace compactiond
