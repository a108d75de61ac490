#include "daemon/cli/common.hpp"

#include <compaction/options.hpp>
#include <cstdint>

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

namespace {

// The length of the UTF-8 sequence starting at text[i] (2..4), or 0 when
// it is not one (stray continuation bytes, overlong forms, surrogates).
std::size_t Utf8Length(std::string_view text, std::size_t i) {
  const auto byte = [&](std::size_t k) {
    return static_cast<unsigned char>(text[k]);
  };
  const unsigned char c = byte(i);
  std::size_t len = 0;
  std::uint32_t cp = 0;
  if ((c & 0xE0) == 0xC0) {
    len = 2;
    cp = c & 0x1F;
  } else if ((c & 0xF0) == 0xE0) {
    len = 3;
    cp = c & 0x0F;
  } else if ((c & 0xF8) == 0xF0) {
    len = 4;
    cp = c & 0x07;
  } else {
    return 0;
  }
  if (i + len > text.size()) return 0;
  for (std::size_t k = 1; k < len; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (byte(i + k) & 0x3F);
  }
  constexpr std::uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMin[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
    return 0;
  }
  // C1 controls (U+0080..U+009F): CSI and friends on a UTF-8 terminal.
  if (cp <= 0x9F) return 0;
  return len;
}

void AppendHex(std::string& out, unsigned char c) {
  constexpr char kDigits[] = "0123456789abcdef";
  out += "\\x";
  out += kDigits[c >> 4];
  out += kDigits[c & 0xF];
}

}  // namespace

bool IsPrintable(std::string_view text) {
  std::size_t i = 0;
  while (i < text.size()) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x80) {
      const std::size_t len = Utf8Length(text, i);
      if (len == 0) return false;
      i += len;
    } else if (c < 0x20 || c == 0x7F) {
      return false;
    } else {
      ++i;
    }
  }
  return true;
}

std::string Printable(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  std::size_t i = 0;
  while (i < text.size()) {
    const auto c = static_cast<unsigned char>(text[i]);
    const std::size_t len = c >= 0x80 ? Utf8Length(text, i) : 0;
    if (len > 0) {
      out.append(text.substr(i, len));
      i += len;
      continue;
    }
    ++i;
    if (c >= 0x20 && c < 0x7F) {
      if (c == '\\') out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else {
      // A C1 control as UTF-8 (0xC2 0x80..0x9F) shows as its two bytes.
      AppendHex(out, c);
    }
  }
  return out;
}

}  // namespace compactiond::cli
