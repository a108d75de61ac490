// The settings' parsers: text to a value within its bounds, or a
// ConfigError naming the key; and the checks between settings.
#include <limits>
#include <map>
#include <string>

#include "compaction/janitor.hpp"
#include "daemon/cli/common.hpp"
#include "daemon/config_parse.hpp"
#include "daemon/conninfo.hpp"
#include "daemon/duration.hpp"

namespace compactiond::detail {

[[noreturn]] void Invalid(const std::string& key, const std::string& value,
                          const std::string& why) {
  if (IsSecretKey(key)) {
    throw ConfigError("invalid value for key '" + key + "': " + why);
  }
  throw ConfigError("invalid value '" + value + "' for key '" + key +
                    "': " + why);
}

std::int64_t ToInt64(const std::string& key, const std::string& v,
                     std::int64_t lo, std::int64_t hi) {
  size_t used = 0;
  long long n = 0;
  try {
    n = std::stoll(v, &used);
  } catch (const std::exception&) {
    Invalid(key, v, "expected an integer");
  }
  if (used != v.size()) Invalid(key, v, "expected an integer");
  if (n < lo || n > hi) {
    Invalid(
        key, v,
        "must be between " + std::to_string(lo) + " and " + std::to_string(hi));
  }
  return n;
}

int ToInt(const std::string& key, const std::string& v, int lo, int hi) {
  return static_cast<int>(ToInt64(key, v, lo, hi));
}

// A positive duration of at most `max`; `about` reads the bound to a person.
Millis ToDuration(const std::string& key, const std::string& v, Millis max,
                  const char* about) {
  const std::string bound =
      "at most " + FormatDuration(max) + " (" + about + ")";
  auto d = ParseDuration(v);
  // ParseDuration also refuses a number too large for 64-bit milliseconds.
  if (!d) {
    Invalid(key, v, "expected a duration such as 500ms, 30s, 5m, 1h, " + bound);
  }
  if (d->count() <= 0) Invalid(key, v, "must be positive");
  if (*d > max) Invalid(key, v, "must be " + bound);
  return *d;
}

Millis ToTtl(const std::string& key, const std::string& v) {
  return ToDuration(key, v, kMaxTtl, "about 100 years");
}

// A topic's retention: "keep" (kKeepForever) or 0..kMaxTtl.
Millis ToRetention(const std::string& key, const std::string& v) {
  if (v == "keep") return compaction::kKeepForever;
  auto d = ParseDuration(v);
  if (!d) {
    Invalid(key, v, "expected a duration such as 0, 10s, 7d, or 'keep'");
  }
  if (*d > kMaxTtl)
    Invalid(key, v, "must be at most " + FormatDuration(kMaxTtl));
  return *d;
}

Millis ToTimer(const std::string& key, const std::string& v) {
  return ToDuration(key, v, kMaxTimer, "one year");
}

// A pause: 0 turns it off. Bounded here like every duration, in the
// operator's units; the library's CheckSweepOptions (CheckSweepPacing
// below) has the same bound and the rules between settings.
Millis ToPause(const std::string& key, const std::string& v) {
  auto d = ParseDuration(v);
  if (!d) Invalid(key, v, "expected a duration such as 0, 10ms, 1s");
  if (*d > kMaxBatchPause) {
    Invalid(key, v, "must be at most " + FormatDuration(kMaxBatchPause));
  }
  return *d;
}

// PostgreSQL takes statement_timeout up to INT_MAX milliseconds.
Millis ToServerTimeout(const std::string& key, const std::string& v) {
  static_assert(kMaxServerTimeout.count() == std::numeric_limits<int>::max());
  return ToDuration(key, v, kMaxServerTimeout, "about 24 days");
}

double ToNumber(const std::string& key, const std::string& v) {
  size_t used = 0;
  double x = 0;
  try {
    x = std::stod(v, &used);
  } catch (const std::exception&) {
    Invalid(key, v, "expected a number");
  }
  if (used != v.size()) Invalid(key, v, "expected a number");
  return x;
}

double ToFraction(const std::string& key, const std::string& v) {
  const double x = ToNumber(key, v);
  if (!(x >= 0.0 && x <= 0.5)) Invalid(key, v, "must be between 0 and 0.5");
  return x;
}

// A name sent to the server as text and shown in logs: printable UTF-8 of
// at most `max` bytes. Neither refusal quotes the value: it may be huge, or
// bytes a terminal would act on.
void CheckName(const std::string& key, const std::string& v, size_t max) {
  if (v.size() > max) {
    throw ConfigError("invalid value for key '" + key + "': must be at most " +
                      std::to_string(max) + " bytes");
  }
  if (!cli::IsPrintable(v)) {
    throw ConfigError("invalid value for key '" + key +
                      "': must be UTF-8 without control characters");
  }
}

void CheckIdentifier(const std::string& key, const std::string& v) {
  CheckName(key, v, 63);
  if (v.empty()) Invalid(key, v, "must be 1..63 bytes");
}

// The sweeps' claim owner: empty means host:pid. Written into every
// topic's claim row, so bounded like a name.
std::string ToOwner(const std::string& key, const std::string& v) {
  CheckName(key, v, kMaxOwnerBytes);
  return v;
}

// A libpq conninfo or URI that libpq parses. libpq's message points at the
// syntax; the value may hold a password, so Invalid() never quotes it.
std::string ToConninfo(const std::string& key, const std::string& v) {
  try {
    ConninfoParams(v);
  } catch (const std::invalid_argument& e) {
    Invalid(key, v, e.what());
  }
  return v;
}

std::string ToIdentifier(const std::string& key, const std::string& v) {
  CheckIdentifier(key, v);
  return v;
}

std::string ToSchema(const std::string& key, const std::string& v) {
  CheckIdentifier(key, v);
  // The library's SQL templates name their placeholders in braces; a
  // schema called "{id}" was once rendered into another schema's name.
  if (v.find_first_of("{}") != std::string::npos) {
    Invalid(key, v, "must not contain '{' or '}'");
  }
  return v;
}

bool ToBool(const std::string& key, const std::string& v) {
  if (v == "true") return true;
  if (v == "false") return false;
  Invalid(key, v, "expected true or false");
}

LogLevel ToLogLevel(const std::string& key, const std::string& v) {
  auto level = ParseLogLevel(v);
  if (!level) Invalid(key, v, "expected debug, info, warn or error");
  return *level;
}

MetricsDetail ToMetricsDetail(const std::string& key, const std::string& v) {
  if (v == "basic") return MetricsDetail::kBasic;
  if (v == "detail") return MetricsDetail::kDetail;
  Invalid(key, v, "expected basic or detail");
}

std::string ToListen(const std::string& key, const std::string& v) {
  ParseListen(key, v);
  return v;
}

// `longer_key`'s value must be at least `shorter_key`'s.
template <class Duration>
void CheckNotShorter(const Values& effective, const char* longer_key,
                     Duration longer, const char* shorter_key,
                     Duration shorter) {
  if (longer < shorter) {
    Invalid(longer_key, effective.at(longer_key),
            std::string("must not be shorter than ") + shorter_key + " (" +
                effective.at(shorter_key) + ")");
  }
}

void CheckRelations(const Settings& s, const Values& effective) {
  CheckNotShorter(effective, "max-interval", s.max_interval, "min-interval",
                  s.min_interval);
  CheckNotShorter(effective, "reconnect-max", s.reconnect_max, "reconnect-min",
                  s.reconnect_min);
  // A claim shorter than one batch could lapse while the batch still runs.
  CheckNotShorter(effective, "claim-ttl", s.claim_ttl, "statement-timeout",
                  s.statement_timeout);
  CheckNotShorter(effective, "cleaner-max-interval", s.cleaner_max_interval,
                  "cleaner-min-interval", s.cleaner_min_interval);
}

// The library's own rules for SweepOptions (compaction::CheckSweepOptions),
// applied to each job's options as the scheduler builds them, and reported
// under the key the operator wrote: one rule, one message, on both sides.
void CheckSweepPacing(const Settings& s, const Values& effective) {
  struct Job {
    const char* batch_key;
    int batch_size;
    const char* pause_key;
    Millis pause;
    const char* duty_key;
    double duty;
  };
  for (const Job& job : {Job{"batch-size", s.batch_size, "batch-pause",
                             s.batch_pause, "duty-cycle", s.duty_cycle},
                         Job{"cleaner-batch-size", s.cleaner_batch_size,
                             "cleaner-batch-pause", s.cleaner_batch_pause,
                             "cleaner-duty-cycle", s.cleaner_duty_cycle}}) {
    compaction::SweepOptions o;
    o.batch_size = job.batch_size;
    o.max_batches = s.max_batches;
    o.statement_timeout = s.statement_timeout;
    o.claim_ttl = s.claim_ttl;
    o.batch_pause = job.pause;
    o.duty_cycle = job.duty;
    const auto error = compaction::CheckSweepOptions(o);
    if (!error) continue;
    const std::map<std::string, std::string> key_of{
        {"batch_size", job.batch_key},
        {"max_batches", "max-batches"},
        {"statement_timeout", "statement-timeout"},
        {"claim_ttl", "claim-ttl"},
        {"batch_pause", job.pause_key},
        {"duty_cycle", job.duty_key}};
    const auto key = key_of.find(error->field);
    if (key == key_of.end())
      throw ConfigError(error->field + " " + error->message);
    std::string why = error->message;
    for (std::size_t at = why.find("claim_ttl"); at != std::string::npos;
         at = why.find("claim_ttl", at)) {
      why.replace(at, 9, "claim-ttl");
    }
    Invalid(key->second, effective.at(key->second), why);
  }
}

}  // namespace compactiond::detail

namespace compactiond {

Millis ParseTtl(const std::string& key, const std::string& text) {
  return detail::ToTtl(key, text);
}

Millis ParseRetention(const std::string& key, const std::string& text) {
  return detail::ToRetention(key, text);
}

int ParseCount(const std::string& key, const std::string& text, int max) {
  return detail::ToInt(key, text, 1, max);
}

std::pair<std::string, unsigned short> ParseListen(const std::string& key,
                                                   const std::string& value) {
  std::string host;
  std::string port;
  if (!value.empty() && value.front() == '[') {
    size_t close = value.find(']');
    if (close == std::string::npos || close + 1 >= value.size() ||
        value[close + 1] != ':') {
      detail::Invalid(key, value, "expected HOST:PORT or [IPV6]:PORT");
    }
    host = value.substr(1, close - 1);
    port = value.substr(close + 2);
    // An empty host would bind every interface: say so in the value.
    if (host.empty()) {
      detail::Invalid(key, value,
                      "the host is empty (write [::] or 0.0.0.0 "
                      "to listen on every interface)");
    }
  } else {
    size_t colon = value.rfind(':');
    if (colon == std::string::npos || colon == 0) {
      detail::Invalid(key, value, "expected HOST:PORT or [IPV6]:PORT");
    }
    host = value.substr(0, colon);
    port = value.substr(colon + 1);
  }
  int p = detail::ToInt(key, port, 0, 65535);
  return {host, static_cast<unsigned short>(p)};
}

}  // namespace compactiond
