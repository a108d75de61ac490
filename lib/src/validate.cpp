#include "validate.hpp"

#include <cstdint>
#include <limits>

#include "compaction/errors.hpp"
#include "compaction/options.hpp"
#include "pg/conninfo.hpp"

namespace compaction::detail {
namespace {

bool IsTopicChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '-';
}

bool IsTopicStart(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

// Printable form of an offending name for error messages: short, no
// control characters.
std::string Shown(const std::string& text) {
  std::string out;
  for (char c : text.substr(0, 40)) {
    out += (static_cast<unsigned char>(c) < 0x20) ? '?' : c;
  }
  return text.size() > 40 ? out + "..." : out;
}

// Topic and consumer names: the same rules (the database CHECKs repeat them).
void ValidateName(const char* operation, const std::string& what,
                  const std::string& name) {
  if (name.empty()) throw InvalidArgument(operation, what + " is empty");
  if (name.size() > kMaxTopicNameLength) {
    throw InvalidArgument(operation, what + " is longer than " +
                                         std::to_string(kMaxTopicNameLength) +
                                         " characters");
  }
  if (!IsTopicStart(name.front())) {
    throw InvalidArgument(operation, what + " \"" + Shown(name) +
                                         "\" must start with a-z or 0-9");
  }
  for (char c : name) {
    if (!IsTopicChar(c)) {
      throw InvalidArgument(operation,
                            what + " \"" + Shown(name) +
                                "\" may contain only a-z, 0-9, '.', '_', '-'");
    }
  }
}

}  // namespace

void ValidateTopicName(const char* operation, const std::string& name) {
  ValidateName(operation, "topic name", name);
}

void ValidateConsumerName(const char* operation, const std::string& name) {
  ValidateName(operation, "consumer name", name);
}

void ValidateMessageKey(const char* operation, const std::string& key) {
  if (key.empty()) throw InvalidArgument(operation, "message key is empty");
  if (key.size() > kMaxMessageKeyBytes) {
    throw InvalidArgument(operation, "message key is longer than " +
                                         std::to_string(kMaxMessageKeyBytes) +
                                         " bytes");
  }
  if (key.find('\0') != std::string::npos) {
    throw InvalidArgument(operation, "message key contains a NUL byte");
  }
  if (!IsValidUtf8(key)) {
    throw InvalidArgument(operation, "message key is not valid UTF-8");
  }
}

void ValidateHeadlessTtl(const char* operation, std::chrono::milliseconds ttl) {
  ValidateTtl(operation, "headless_ttl", ttl);
}

std::string TtlProblem(std::chrono::milliseconds ttl) {
  if (ttl.count() > 0 && ttl <= kMaxTtl) return {};
  return "must be in 1.." + std::to_string(kMaxTtl.count()) +
         " ms (36500 days), got " + std::to_string(ttl.count()) + " ms";
}

void ValidateTtl(const char* operation, const char* what,
                 std::chrono::milliseconds ttl) {
  if (const std::string problem = TtlProblem(ttl); !problem.empty()) {
    throw InvalidArgument(operation, std::string(what) + " " + problem);
  }
}

void ValidateRetention(const char* operation, const char* what,
                       std::chrono::milliseconds retention) {
  if (retention == kKeepForever) return;
  if (retention.count() < 0 || retention > kMaxTtl) {
    throw InvalidArgument(operation,
                          std::string(what) + " must be in 0.." +
                              std::to_string(kMaxTtl.count()) +
                              " ms (36500 days) or kKeepForever, got " +
                              std::to_string(retention.count()) + " ms");
  }
}

std::string ServerTimeoutProblem(std::chrono::milliseconds timeout) {
  constexpr std::int64_t kMaxMs = kMaxServerTimeout.count();
  if (timeout.count() > 0 && timeout.count() <= kMaxMs) return {};
  return "must be in 1.." + std::to_string(kMaxMs) + " ms, got " +
         std::to_string(timeout.count());
}

void ValidateServerTimeout(const char* operation, const char* what,
                           std::chrono::milliseconds timeout) {
  if (const std::string problem = ServerTimeoutProblem(timeout);
      !problem.empty()) {
    throw InvalidArgument(operation, std::string(what) + " " + problem);
  }
}

void ValidateLimit(const char* operation, const char* what, int limit,
                   int max) {
  if (limit <= 0 || limit > max) {
    throw InvalidArgument(operation, std::string(what) + " must be in 1.." +
                                         std::to_string(max) + ", got " +
                                         std::to_string(limit));
  }
}

void CheckClientOptions(const char* operation, const ClientOptions& options) {
  if (options.acquire_timeout.count() <= 0) {
    throw InvalidArgument(operation, "acquire_timeout must be positive");
  }
  if (options.pool_size < 1) {
    throw InvalidArgument(operation, "pool_size must be at least 1, got " +
                                         std::to_string(options.pool_size));
  }
  const std::string& schema = options.schema;
  if (schema.empty()) throw InvalidArgument(operation, "schema is empty");
  if (schema.size() > 63) {
    throw InvalidArgument(operation, "schema name is longer than 63 bytes");
  }
  if (!IsValidUtf8(schema) || schema.find('\0') != std::string::npos) {
    throw InvalidArgument(operation,
                          "schema name is not valid UTF-8 without NUL");
  }
  for (const auto& [name, value] : options.session_settings) {
    if (!pg::IsSettingName(name)) {
      throw InvalidArgument(operation, "session_settings: \"" + Shown(name) +
                                           "\" is not a setting name "
                                           "(letters, digits, '_', '.')");
    }
    if (pg::IsPinnedSetting(name)) {
      throw InvalidArgument(operation, "session_settings: " + name +
                                           " is set by the library on every "
                                           "connection and cannot be changed");
    }
    if (value.find('\0') != std::string::npos) {
      throw InvalidArgument(operation, "session_settings: the value of " +
                                           name + " holds a NUL byte");
    }
  }
}

bool IsValidUtf8(const std::string& text) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const std::size_t n = text.size();
  std::size_t i = 0;
  while (i < n) {
    const unsigned char c = s[i];
    std::size_t len = 0;
    std::uint32_t cp = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      len = 2;
      cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3;
      cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (i + len > n) return false;
    for (std::size_t k = 1; k < len; ++k) {
      if ((s[i + k] & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (s[i + k] & 0x3F);
    }
    // Overlong forms, UTF-16 surrogates and values past U+10FFFF.
    const std::uint32_t min_for_len[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min_for_len[len] || cp > 0x10FFFF ||
        (cp >= 0xD800 && cp <= 0xDFFF)) {
      return false;
    }
    i += len;
  }
  return true;
}

}  // namespace compaction::detail
