// libFuzzer target: the daemon's conninfo parsing, rendering and masking
// (what --print-config shows) over arbitrary strings, as keyword/value text
// or a URI. Crashes when a secret's value can be read from the masked text:
//   - the masked text must parse, with each secret shown as the mask and
//     every other keyword unchanged (so nothing is smuggled elsewhere);
//   - the masked text must not depend on the secret: changing the secret's
//     value leaves MaskConninfo's output the same;
// and on any exception but the documented std::invalid_argument, or a
// sanitizer report.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <stdexcept>
#include <string>

#include "daemon/conninfo.hpp"

namespace {

// At least these are secrets (doc/security.md), whatever else
// IsSecretKeyword adds.
constexpr const char* kSecrets[] = {"password", "sslpassword"};
constexpr const char* kMask = "********";

void Require(bool condition) {
  if (!condition) std::abort();
}

using Params = std::map<std::string, std::string>;

bool Parses(const std::string& conninfo, Params* params) {
  try {
    *params = compactiond::ConninfoParams(conninfo);
    return true;
  } catch (const std::invalid_argument&) {
    return false;
  }
}

void CheckMasked(const std::string& conninfo, const Params& params) {
  const std::string masked = compactiond::MaskConninfo(conninfo);
  Params shown;
  Require(Parses(masked, &shown));
  Require(shown.size() == params.size());
  for (const auto& [key, value] : params) {
    bool secret = compactiond::IsSecretKeyword(key);
    Require(shown.count(key) == 1);
    Require(shown.at(key) == (secret ? kMask : value));
  }
  // The same conninfo with every secret replaced masks to the same text.
  Params changed = params;
  bool has_secret = false;
  for (auto& [key, value] : changed) {
    if (!compactiond::IsSecretKeyword(key)) continue;
    has_secret = has_secret || !value.empty();
    value += "-other";
  }
  Require(compactiond::MaskConninfo(compactiond::RenderConninfo(changed)) ==
          masked);
  Require(compactiond::ConninfoHasSecret(conninfo) == has_secret);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // libpq reads a C string: what follows a NUL is never seen.
  for (const char* s : kSecrets) Require(compactiond::IsSecretKeyword(s));
  const char* text = reinterpret_cast<const char*>(data);
  std::string conninfo(text, strnlen(text, size));
  Params params;
  if (Parses(conninfo, &params)) {
    CheckMasked(conninfo, params);
  } else {
    Require(compactiond::MaskConninfo(conninfo) == "<unparsable conninfo>");
    Require(!compactiond::ConninfoHasSecret(conninfo));
  }
  return 0;
}
