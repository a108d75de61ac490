#include "compaction/conninfo.hpp"

#include "compaction/errors.hpp"
#include "pg/conninfo.hpp"

namespace compaction {

ConnParams ParseConninfo(const std::string& conninfo) {
  if (conninfo.empty()) return {};
  return pg::ParseConninfo(conninfo, "ParseConninfo");
}

bool IsSecretConninfoKeyword(std::string_view keyword) {
  return keyword == "password" || keyword == "sslpassword";
}

std::string RenderConninfo(const ConnParams& params) {
  std::string out;
  for (const auto& [keyword, value] : params) {
    if (!out.empty()) out.push_back(' ');
    out.append(keyword).append("='");
    for (char c : value) {
      if (c == '\'' || c == '\\') out.push_back('\\');
      out.push_back(c);
    }
    out.push_back('\'');
  }
  return out;
}

std::string MaskConninfo(const std::string& conninfo) {
  if (conninfo.empty()) return "";
  ConnParams params;
  try {
    params = ParseConninfo(conninfo);
  } catch (const InvalidArgument&) {
    return "<unparsable conninfo>";
  }
  // Even an empty secret is masked: its length is nobody's business.
  for (auto& [keyword, value] : params) {
    if (IsSecretConninfoKeyword(keyword)) value = "********";
  }
  return RenderConninfo(params);
}

}  // namespace compaction
