#include "daemon/conninfo.hpp"

#include <compaction/conninfo.hpp>
#include <compaction/errors.hpp>
#include <stdexcept>
#include <utility>

#include "daemon/log.hpp"

namespace compactiond {

bool IsSecretKeyword(const std::string& keyword) {
  return compaction::IsSecretConninfoKeyword(keyword);
}

bool ConninfoHasSecret(const std::string& conninfo) {
  compaction::ConnParams params;
  try {
    params = compaction::ParseConninfo(conninfo);
  } catch (const compaction::InvalidArgument&) {
    return false;
  }
  for (const auto& [keyword, value] : params) {
    if (IsSecretKeyword(keyword) && !value.empty()) return true;
  }
  return false;
}

std::string MaskConninfo(const std::string& conninfo) {
  return compaction::MaskConninfo(conninfo);
}

std::map<std::string, std::string> ConninfoParams(
    const std::string& conninfo,
    const std::map<std::string, std::string>& overrides) {
  std::map<std::string, std::string> params;
  try {
    params = compaction::ParseConninfo(conninfo);
  } catch (const compaction::InvalidArgument&) {
    // Not libpq's message: it quotes the offending text, which can be a
    // password (an unescaped '%' in a URI's user:password@, say).
    throw std::invalid_argument("not a valid libpq conninfo or URI");
  }
  for (const auto& [k, v] : overrides) params[k] = v;
  return params;
}

std::string RenderConninfo(const std::map<std::string, std::string>& params) {
  return compaction::RenderConninfo(params);
}

std::map<std::string, std::string> ConnectionParams(const Settings& s) {
  std::map<std::string, std::string> params;
  try {
    params = ConninfoParams(s.db);
  } catch (const std::invalid_argument& e) {
    throw ConfigError("invalid value for key 'db': " + std::string(e.what()));
  }
  params["application_name"] = s.application_name;
  return params;
}

compaction::ClientOptions ClientOptionsFor(const Settings& s) {
  compaction::ClientOptions options;
  options.schema = s.schema;
  options.pool_size = s.pool_size;
  options.application_name = s.application_name;
  options.prepared_statements = s.prepared_statements;
  // In milliseconds, the server's unit for it. The library applies it as a
  // startup option or, behind a transaction pooler, per transaction.
  options.session_settings["statement_timeout"] =
      std::to_string(s.stats_timeout.count());
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
