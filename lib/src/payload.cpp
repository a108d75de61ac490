#include "payload.hpp"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "compaction/detail/entry_points.hpp"
#include "compaction/errors.hpp"
#include "compaction/message.hpp"

namespace compaction::detail {
namespace {

using Json = nlohmann::json;

// One open container of an iterative depth-first walk; `it` is the child
// being visited. Payloads can nest thousands deep (jsonb allows about
// 10,000 levels), too deep to recurse on a small thread stack.
struct Frame {
  const Json* node;
  Json::const_iterator it;
  bool started = false;
};

// Visits every value of `root` depth first: visit(value, stack) returns
// false to stop (Walk then returns false too).
template <class Visit>
bool Walk(const Json& root, std::vector<Frame>& stack, Visit&& visit) {
  const Json* value = &root;
  for (;;) {
    if (!visit(*value, stack)) return false;
    if (value->is_structured()) {
      stack.push_back(Frame{value, value->cbegin()});
    }
    value = nullptr;
    while (!stack.empty()) {
      Frame& f = stack.back();
      if (f.started) ++f.it;
      f.started = true;
      if (f.it != f.node->cend()) {
        value = &*f.it;
        break;
      }
      stack.pop_back();
    }
    if (value == nullptr) return true;
  }
}

// Member names that look like a program's field names are shown in error
// paths; any other name may be data (a map keyed by user input) and is
// shown as '*', since errors never carry payload content.
std::string ShownMember(const std::string& name) {
  if (name.empty() || name.size() > 32) return "*";
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                    (c >= '0' && c <= '9') || c == '_';
    if (!ok) return "*";
  }
  return name;
}

// Where the walk stands, as a JSON Pointer ("" is the whole payload).
std::string Path(const std::vector<Frame>& stack) {
  std::string out;
  for (const Frame& f : stack) {
    out += '/';
    if (f.node->is_object()) {
      out += ShownMember(f.it.key());
    } else {
      out += std::to_string(f.it - f.node->cbegin());
    }
  }
  return out.empty() ? "the top level" : out;
}

// The path as a json_pointer, to look the same place up in another value.
Json::json_pointer Pointer(const std::vector<Frame>& stack) {
  Json::json_pointer out;
  for (const Frame& f : stack) {
    if (f.node->is_object()) {
      out /= f.it.key();
    } else {
      out /= static_cast<std::size_t>(f.it - f.node->cbegin());
    }
  }
  return out;
}

bool HasNul(const std::string& s) {
  return std::memchr(s.data(), '\0', s.size()) != nullptr;
}

// A float no int64 can hold (a cast to one would be undefined), or an
// unsigned above INT64_MAX (a cast to int64 wraps to a negative value).
constexpr double kTwoTo63 = 9223372036854775808.0;
constexpr double kTwoTo64 = 18446744073709551616.0;

bool IsWide(const Json& v) {
  if (v.is_number_float()) {
    const double d = v.get<double>();
    return !(d > -kTwoTo63 && d < kTwoTo63);  // NaN counts as wide
  }
  return v.is_number_unsigned() &&
         v.get<std::uint64_t>() > static_cast<std::uint64_t>(
                                      std::numeric_limits<std::int64_t>::max());
}

// Marks what a number beyond double range was replaced with before the
// second parse (ParseStoredPayload). jsonb prints numbers in plain notation
// (numeric_out never writes an exponent), so no stored number looks like
// these; a payload that has one anyway is refused rather than misread.
constexpr const char* kPlusInfinity = "1E0";
constexpr const char* kMinusInfinity = "-1E0";

class PayloadSax : public nlohmann::detail::json_sax_dom_parser<Json> {
 public:
  PayloadSax(Json& result, bool markers)
      : json_sax_dom_parser(result, false), markers_(markers) {}

  bool number_float(double value, const std::string& token) {
    if (markers_ && token == kPlusInfinity) {
      value = std::numeric_limits<double>::infinity();
    } else if (markers_ && token == kMinusInfinity) {
      value = -std::numeric_limits<double>::infinity();
    }
    return json_sax_dom_parser::number_float(value, token);
  }

  template <class Exception>
  bool parse_error(std::size_t position, const std::string&,
                   const Exception& e) {
    error_id_ = e.id;
    position_ = position;
    return false;
  }

  int error_id() const { return error_id_; }
  std::size_t position() const { return position_; }

 private:
  bool markers_;
  int error_id_ = 0;
  std::size_t position_ = 0;
};

// nlohmann_json's id of "number overflow" (out_of_range.406).
constexpr int kNumberOverflow = 406;

// Copies `text` with each number beyond double range replaced by a marker.
// false: the text already holds a marker (or is cut off inside a string).
bool MarkOverflows(const char* text, std::size_t length, std::string& out) {
  out.reserve(length);
  std::size_t i = 0;
  while (i < length) {
    const char c = text[i];
    if (c == '"') {
      std::size_t j = i + 1;
      while (j < length && text[j] != '"') j += (text[j] == '\\') ? 2 : 1;
      if (j >= length) return false;
      out.append(text + i, j + 1 - i);
      i = j + 1;
    } else if (c == '-' || (c >= '0' && c <= '9')) {
      std::size_t j = i + 1;
      while (j < length && std::strchr("0123456789.eE+-", text[j]) != nullptr) {
        ++j;
      }
      const std::string token(text + i, j - i);
      if (token == kPlusInfinity || token == kMinusInfinity) return false;
      if (std::isfinite(std::strtod(token.c_str(), nullptr))) {
        out += token;
      } else {
        out += c == '-' ? kMinusInfinity : kPlusInfinity;
      }
      i = j;
    } else {
      out += c;
      ++i;
    }
  }
  return true;
}

[[noreturn]] void ThrowUnreadable(const char* operation, std::int64_t id,
                                  const PayloadSax& sax) {
  // The parser's own message quotes the text around the error: left out.
  throw MessageDecodeError(operation, id,
                           "the stored payload is not JSON this library reads "
                           "(json.exception " +
                               std::to_string(sax.error_id()) + " at byte " +
                               std::to_string(sax.position()) + ")");
}

enum class Problem { kNone, kNonFinite, kNulInString, kNulInName, kTooDeep };

// The produce-time check, on every payload sent: recursive (the depth is
// bounded by kMaxPayloadDepth) over the containers themselves, about twice
// as fast as the iterator walk. Fills `path` innermost first on the way out.
Problem FindProblem(const Json& v, std::size_t depth,
                    std::vector<std::string>& path) {
  switch (v.type()) {
    case Json::value_t::number_float:
      return std::isfinite(v.get_ref<const double&>()) ? Problem::kNone
                                                       : Problem::kNonFinite;
    case Json::value_t::string:
      return HasNul(v.get_ref<const std::string&>()) ? Problem::kNulInString
                                                     : Problem::kNone;
    case Json::value_t::object:
      if (depth == kMaxPayloadDepth) return Problem::kTooDeep;
      for (const auto& [name, child] : v.get_ref<const Json::object_t&>()) {
        Problem p = HasNul(name) ? Problem::kNulInName
                                 : FindProblem(child, depth + 1, path);
        if (p == Problem::kNone) continue;
        if (p != Problem::kTooDeep) path.push_back(ShownMember(name));
        return p;
      }
      return Problem::kNone;
    case Json::value_t::array: {
      if (depth == kMaxPayloadDepth) return Problem::kTooDeep;
      const auto& items = v.get_ref<const Json::array_t&>();
      for (std::size_t i = 0; i < items.size(); ++i) {
        const Problem p = FindProblem(items[i], depth + 1, path);
        if (p == Problem::kNone) continue;
        if (p != Problem::kTooDeep) path.push_back(std::to_string(i));
        return p;
      }
      return Problem::kNone;
    }
    default:
      return Problem::kNone;
  }
}

}  // namespace

void ValidatePayload(const char* operation, const Json& payload) {
  std::vector<std::string> path;  // innermost first
  const Problem problem = FindProblem(payload, 0, path);
  if (problem == Problem::kNone) return;
  if (problem == Problem::kTooDeep) {
    throw InvalidArgument(operation,
                          "payload has containers nested deeper than " +
                              std::to_string(kMaxPayloadDepth) + " levels");
  }
  std::string where;
  for (auto it = path.rbegin(); it != path.rend(); ++it) where += "/" + *it;
  if (where.empty()) where = "the top level";
  const char* what = problem == Problem::kNonFinite
                         ? "a NaN or infinite number at "
                     : problem == Problem::kNulInString
                         ? "a string with a NUL character at "
                         : "a member name with a NUL character at ";
  const char* why = problem == Problem::kNonFinite
                        ? " (JSON has none; it would be stored as null)"
                        : " (jsonb cannot store U+0000)";
  throw InvalidArgument(operation,
                        std::string("payload has ") + what + where + why);
}

Json ParseStoredPayload(const char* operation, std::int64_t message_id,
                        const char* text, std::size_t length) {
  Json result;
  {
    PayloadSax sax(result, false);
    if (Json::sax_parse(text, text + length, &sax)) return result;
    if (sax.error_id() != kNumberOverflow) {
      ThrowUnreadable(operation, message_id, sax);
    }
  }
  // Rare: a number beyond double range (valid jsonb, e.g. 1e400). Parsed
  // again with it as +-infinity, the nearest double; RawMessage::payload_text
  // keeps the exact digits.
  std::string marked;
  result = Json();
  PayloadSax sax(result, true);
  if (!MarkOverflows(text, length, marked) ||
      !Json::sax_parse(marked.data(), marked.data() + marked.size(), &sax)) {
    ThrowUnreadable(operation, message_id, sax);
  }
  return result;
}

bool ZeroWideNumbers(const char* operation, std::int64_t message_id,
                     const Json& payload, Json& zeroed) {
  std::vector<Frame> stack;
  std::vector<Json::json_pointer> wide;
  const auto visit = [&](const Json& v, const std::vector<Frame>& at) {
    if (!IsWide(v)) return true;
    if (v.is_number_float() && !std::isfinite(v.get<double>())) {
      throw MessageDecodeError(operation, message_id,
                               "a number beyond double range at " + Path(at) +
                                   " (read it as RawMessage)");
    }
    wide.push_back(Pointer(at));
    return true;
  };
  Walk(payload, stack, visit);
  if (wide.empty()) return false;
  zeroed = payload;
  for (const auto& p : wide) zeroed[p] = 0;
  return true;
}

void CheckWideNumbers(const char* operation, std::int64_t message_id,
                      const Json& payload, const Json& encoded) {
  std::vector<Frame> stack;
  const auto visit = [&](const Json& v, const std::vector<Frame>& at) {
    if (!IsWide(v)) return true;
    const Json::json_pointer p = Pointer(at);
    if (!encoded.contains(p)) return true;
    const Json& as = encoded.at(p);
    bool lossy = as.is_number_integer() && !as.is_number_unsigned();
    if (as.is_number_unsigned() && v.is_number_float()) {
      const double d = v.get<double>();
      lossy = d < 0 || d >= kTwoTo64;
    }
    if (!lossy) return true;
    throw MessageDecodeError(
        operation, message_id,
        "the number at " + Path(at) +
            " does not fit the integer field it decodes into");
  };
  Walk(payload, stack, visit);
}

std::string DecodeReason(const Json::exception& e) {
  // A parse error (a from_json that parses a string member) quotes the
  // text it read; type and range errors name types and member names only.
  if (dynamic_cast<const Json::parse_error*>(&e) != nullptr ||
      e.id == kNumberOverflow) {
    return "json.exception " + std::to_string(e.id);
  }
  return e.what();
}

std::string DumpPayload(const char* operation, const Json& payload) {
  ValidatePayload(operation, payload);
  try {
    return payload.dump();
  } catch (const Json::exception& e) {
    throw InvalidArgument(
        operation, std::string("payload does not serialize: ") + e.what());
  }
}

}  // namespace compaction::detail
