#include "daemon/config.hpp"

#include <sys/stat.h>

#include <boost/program_options.hpp>
#include <cctype>
#include <charconv>
#include <compaction/stats.hpp>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <sstream>
#include <type_traits>

#include "daemon/cli/table.hpp"
#include "daemon/config_file.hpp"
#include "daemon/conninfo.hpp"
#include "daemon/duration.hpp"
#include "daemon/suggest.hpp"

namespace po = boost::program_options;

namespace compactiond {
namespace {

constexpr const char* kEnvPrefix = "COMPACTIOND_";

// --- parsers: text to a value within bounds, or a ConfigError naming the key

bool IsSecretKey(const std::string& key);

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

// A pause: 0 turns it off; at most the library's bound.
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

// The library's SweepOptions::duty_cycle: (0, 1], 1 adds no pause. Janitor
// checks the same range (ValidateSweep in lib/src/janitor.cpp) and exports
// no predicate for it; this is the daemon's only copy.
double ToDutyCycle(const std::string& key, const std::string& v) {
  const double x = ToNumber(key, v);
  if (!(x > 0.0 && x <= 1.0)) {
    Invalid(key, v, "must be above 0 and at most 1");
  }
  return x;
}

void CheckIdentifier(const std::string& key, const std::string& v) {
  if (v.empty() || v.size() > 63) Invalid(key, v, "must be 1..63 characters");
  for (char c : v) {
    if (static_cast<unsigned char>(c) < 0x20) {
      Invalid(key, v, "must not contain control characters");
    }
  }
}

// Any text (owner: empty means host:pid).
std::string ToText(const std::string&, const std::string& v) { return v; }

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

std::string ToListen(const std::string& key, const std::string& v) {
  ParseListen(key, v);
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

// An integer parser bounded to [lo, hi], typed as the member it fills.
template <typename T>
auto IntIn(T lo, T hi) {
  return [lo, hi](const std::string& key, const std::string& v) {
    return static_cast<T>(ToInt64(key, v, lo, hi));
  };
}

// --- formatters: the text each parser reads back -------------------------

std::string Format(const std::string& v) { return v; }
std::string Format(int v) { return std::to_string(v); }
std::string Format(bool v) { return v ? "true" : "false"; }
std::string Format(std::int64_t v) { return std::to_string(v); }
std::string Format(Millis v) { return FormatDuration(v); }
std::string Format(LogLevel v) { return std::string(LogLevelName(v)); }
std::string Format(MetricsDetail v) {
  return v == MetricsDetail::kDetail ? "detail" : "basic";
}
// Shortest form that reads back the same: 0.1, 0.5, 1.
std::string Format(double v) {
  char buf[32];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  return ec == std::errc() ? std::string(buf, end) : std::string("nan");
}

// One row of the table from a member of Settings: the parser sets it, the
// formatter of its type renders it, the default is the member's own.
struct Traits {
  bool restart_only = false;
  bool secret = false;
};

template <typename T, typename Parse>
SettingSpec Setting(const char* name, const char* help, T Settings::*member,
                    Parse parse, Traits traits = {}) {
  static_assert(
      std::is_same_v<
          std::invoke_result_t<Parse, const std::string&, const std::string&>,
          T>,
      "the parser must yield the member's type");
  SettingSpec spec;
  spec.name = name;
  spec.help = help;
  spec.restart_only = traits.restart_only;
  spec.secret = traits.secret;
  spec.parse = [key = spec.name, member, parse](Settings& s,
                                                const std::string& text) {
    s.*member = parse(key, text);
  };
  spec.format = [member](const Settings& s) { return Format(s.*member); };
  spec.same = [member](const Settings& a, const Settings& b) {
    return a.*member == b.*member;
  };
  spec.copy = [member](Settings& to, const Settings& from) {
    to.*member = from.*member;
  };
  return spec;
}

constexpr Traits kRestart{.restart_only = true};

}  // namespace

const std::vector<SettingSpec>& SettingTable() {
  using S = Settings;
  static const std::vector<SettingSpec> table = {
      Setting("db",
              "libpq conninfo or URI, without a password or sslpassword "
              "(empty: PG* variables)",
              &S::db, ToConninfo, {.restart_only = true, .secret = true}),
      Setting("schema", "database schema holding the compaction tables",
              &S::schema, ToSchema, kRestart),
      Setting("listen", "HOST:PORT of the HTTP endpoints (run only)",
              &S::listen, ToListen, kRestart),
      Setting("pool-size",
              "database connections (and worker threads) for queries",
              &S::pool_size, IntIn(1, 64), kRestart),
      Setting("application-name",
              "pg_stat_activity.application_name of connections",
              &S::application_name, ToIdentifier, kRestart),
      Setting("min-interval", "shortest sweep interval of a topic",
              &S::min_interval, ToTimer),
      Setting("max-interval", "longest sweep interval of a topic",
              &S::max_interval, ToTimer),
      Setting("jitter", "fraction of the interval taken off at random, 0..0.5",
              &S::jitter, ToFraction),
      Setting("batch-size", "rows deleted per batch transaction",
              &S::batch_size, IntIn(1, 100000)),
      Setting("max-batches", "batches per sweep of one topic", &S::max_batches,
              IntIn(1, 1000000)),
      Setting("statement-timeout", "server-side bound of one batch statement",
              &S::statement_timeout, ToServerTimeout),
      Setting("claim-ttl", "lifetime of a sweep's claim on its topic",
              &S::claim_ttl, ToTtl),
      Setting("batch-pause", "pause after each full batch, 0..1m (0: none)",
              &S::batch_pause, ToPause),
      Setting("duty-cycle",
              "largest share of a sweep's time spent in batches, (0, 1]",
              &S::duty_cycle, ToDutyCycle),
      Setting("owner",
              "name of this replica in janitor_state (empty: host:pid)",
              &S::owner, ToText),
      Setting("cleaner-min-interval",
              "shortest log cleaner interval of a topic",
              &S::cleaner_min_interval, ToTimer),
      Setting("cleaner-max-interval", "longest log cleaner interval of a topic",
              &S::cleaner_max_interval, ToTimer),
      Setting("cleaner-batch-size", "messages examined per cleaner batch",
              &S::cleaner_batch_size, IntIn(1, 100000)),
      Setting("cleaner-batch-pause",
              "cleaner pause after each full batch, 0..1m (0: none)",
              &S::cleaner_batch_pause, ToPause),
      Setting("cleaner-duty-cycle",
              "largest share of a cleaner pass spent in batches, (0, 1]",
              &S::cleaner_duty_cycle, ToDutyCycle),
      Setting("stats-interval", "period of the statistics refresh",
              &S::stats_interval, ToTimer),
      Setting("stats-timeout", "statement timeout of the statistics queries",
              &S::stats_timeout, ToServerTimeout, kRestart),
      Setting("stats-exact-count-limit",
              "headless rows counted exactly per topic; estimated "
              "above",
              &S::stats_exact_count_limit,
              IntIn<std::int64_t>(1, compaction::StatsOptions::kCountAll)),
      Setting("topic-refresh-interval", "period of the topic list refresh",
              &S::topic_refresh_interval, ToTimer),
      Setting("prepared-statements",
              "prepare statements per connection (false: unnamed statements "
              "and settings per transaction, for transaction poolers)",
              &S::prepared_statements, ToBool, kRestart),
      Setting("listen-notify",
              "learn of topic changes over LISTEN (false, or when LISTEN "
              "does not work: poll every topic-refresh-interval)",
              &S::listen_notify, ToBool, kRestart),
      Setting("reconnect-min", "first retry delay after a database failure",
              &S::reconnect_min, ToTimer),
      Setting("reconnect-max", "largest retry delay after a database failure",
              &S::reconnect_max, ToTimer),
      Setting("shutdown-timeout", "time allowed to finish sweeps after SIGTERM",
              &S::shutdown_timeout, ToTimer),
      Setting("log-level", "debug, info, warn or error", &S::log_level,
              ToLogLevel),
      Setting("metrics-per-topic",
              "basic: per-topic series only for what alerts need, the rest "
              "summed; detail: every series per topic",
              &S::metrics_per_topic, ToMetricsDetail, kRestart),
  };
  return table;
}

ReloadPlan PlanReload(const Settings& running, const Settings& fresh) {
  ReloadPlan plan{fresh, {}};
  for (const SettingSpec& spec : SettingTable()) {
    if (!spec.restart_only) continue;
    if (!spec.same(running, fresh)) plan.ignored.push_back(spec.name);
    // Keep the running value, so later comparisons stay honest.
    spec.copy(plan.settings, running);
  }
  return plan;
}

namespace {

const SettingSpec* FindSetting(const std::string& name) {
  for (const SettingSpec& spec : SettingTable()) {
    if (spec.name == name) return &spec;
  }
  return nullptr;
}

// Keys whose value can hold a secret, and so is never quoted.
bool IsSecretKey(const std::string& key) {
  const SettingSpec* spec = FindSetting(key);
  return spec != nullptr && spec->secret;
}

// --- sources: command line, environment, config file ----------------------

// Settings without defaults, so that "absent" stays visible per source.
po::options_description SettingsTable() {
  po::options_description desc(
      "Settings (flag, COMPACTIOND_* variable or config file key)");
  for (const SettingSpec& spec : SettingTable()) {
    desc.add_options()(spec.name.c_str(), po::value<std::string>(),
                       spec.help.c_str());
  }
  return desc;
}

po::options_description CommandLineOnly() {
  po::options_description desc("Command-line options");
  // One option a line, as --help prints them.
  // clang-format off
  desc.add_options()
      ("help,h", "print this help and exit")
      ("version", "print the version and exit")
      ("config", po::value<std::string>(),
       "config file (also COMPACTIOND_CONFIG)")
      ("check-config", "validate the configuration and exit")
      ("print-config",
       "print the effective configuration (secrets masked) and exit");
  // clang-format on
  return desc;
}

// The subcommands' flags, from the command table.
po::options_description CommandOptions() {
  po::options_description desc("Command options");
  for (const cli::Flag& f : cli::CommandFlags()) {
    if (f.value.empty()) {
      desc.add_options()(f.name.c_str(), f.help.c_str());
    } else {
      desc.add_options()(f.name.c_str(), po::value<std::string>(),
                         f.help.c_str());
    }
  }
  return desc;
}

// The positional subcommand words; parsed, never shown in --help.
po::options_description Positional() {
  po::options_description desc;
  desc.add_options()("command", po::value<std::vector<std::string>>());
  return desc;
}

}  // namespace

std::string EnvName(const std::string& key) {
  std::string out = kEnvPrefix;
  for (char c : key) {
    out.push_back(c == '-' ? '_' : static_cast<char>(std::toupper(c)));
  }
  return out;
}

namespace {

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
std::string Flag(const std::string& key) { return "--" + key; }

using Values = std::map<std::string, std::string>;

Values ToValues(const po::parsed_options& parsed) {
  Values out;
  for (const auto& o : parsed.options) {
    if (o.unregistered || o.value.empty()) continue;
    out[o.string_key] = o.value.back();
  }
  return out;
}

bool IsSettingKey(const std::string& name) {
  return FindSetting(name) != nullptr;
}

// Whether an unknown key may be quoted in an error: only when it looks like
// a key. "host" of a line "host=h password=pw" is fine to show; the left
// side of "postgres://u:pw@h/db?sslmode=require" is not.
bool LooksLikeKey(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name) {
    const auto u = static_cast<unsigned char>(c);
    if (!std::isalnum(u) && c != '-' && c != '_' && c != '.') return false;
  }
  return true;
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
    return ToValues(po::parse_environment(SettingsTable(), EnvToKey));
  } catch (const po::error& e) {
    throw ConfigError(std::string("environment: ") + e.what());
  }
}

void CheckRelations(const Settings& s, const Values& effective) {
  if (s.max_interval < s.min_interval) {
    Invalid("max-interval", effective.at("max-interval"),
            "must not be shorter than min-interval (" +
                effective.at("min-interval") + ")");
  }
  if (s.reconnect_max < s.reconnect_min) {
    Invalid("reconnect-max", effective.at("reconnect-max"),
            "must not be shorter than reconnect-min (" +
                effective.at("reconnect-min") + ")");
  }
  if (s.claim_ttl < s.statement_timeout) {
    // A claim shorter than one batch could lapse while the batch still runs.
    Invalid("claim-ttl", effective.at("claim-ttl"),
            "must not be shorter than statement-timeout (" +
                effective.at("statement-timeout") + ")");
  }
  if (s.cleaner_max_interval < s.cleaner_min_interval) {
    Invalid("cleaner-max-interval", effective.at("cleaner-max-interval"),
            "must not be shorter than cleaner-min-interval (" +
                effective.at("cleaner-min-interval") + ")");
  }
  // The library refuses them: a claim must outlast the pause it covers.
  for (const auto& [key, pause] :
       {std::pair{"batch-pause", s.batch_pause},
        std::pair{"cleaner-batch-pause", s.cleaner_batch_pause}}) {
    if (pause.count() > 0 && pause >= s.claim_ttl) {
      Invalid(
          key, effective.at(key),
          "must be shorter than claim-ttl (" + effective.at("claim-ttl") + ")");
    }
  }
}

po::variables_map ParseArgs(const std::vector<std::string>& args) {
  po::options_description all;
  all.add(SettingsTable())
      .add(CommandLineOnly())
      .add(CommandOptions())
      .add(Positional());
  po::positional_options_description positional;
  positional.add("command", -1);
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(args)
                  .options(all)
                  .positional(positional)
                  .style(po::command_line_style::unix_style &
                         ~po::command_line_style::allow_guessing)
                  .run(),
              vm);
  } catch (const po::unknown_option& e) {
    const std::string flag = e.get_option_name();
    const std::string key = flag.substr(flag.find_first_not_of('-'));
    throw ConfigError(std::string("command line: ") + e.what() +
                      DidYouMeanSetting(key, Flag));
  } catch (const po::error& e) {
    throw ConfigError(std::string("command line: ") + e.what());
  }
  return vm;
}

Values FlagValues(const po::variables_map& vm) {
  Values out;
  for (const SettingSpec& spec : SettingTable()) {
    if (vm.count(spec.name) != 0) {
      out[spec.name] = vm[spec.name].as<std::string>();
    }
  }
  return out;
}

void ReadCommandLineOnly(const po::variables_map& vm, Invocation& inv) {
  if (vm.count("command") != 0) {
    inv.command = vm["command"].as<std::vector<std::string>>();
  }
  inv.help = vm.count("help") != 0;
  inv.version = vm.count("version") != 0;
  inv.check_config = vm.count("check-config") != 0;
  inv.print_config = vm.count("print-config") != 0;
  for (const cli::Flag& f : cli::CommandFlags()) {
    if (vm.count(f.name) == 0) continue;
    inv.options[f.name] = f.value.empty() ? "" : vm[f.name].as<std::string>();
  }
  if (vm.count("config") != 0) {
    inv.config_file = vm["config"].as<std::string>();
  } else if (const char* env = std::getenv("COMPACTIOND_CONFIG")) {
    inv.config_file = env;
  }
}

// A conninfo with a password on the command line is visible to every local
// user (ps, /proc); it is refused before anything else reads it.
void RefuseSecretFlags(const Values& flags) {
  for (const auto& [key, value] : flags) {
    if (IsSecretKey(key) && ConninfoHasSecret(value)) {
      throw ConfigError(
          "key '" + key +
          "': a password or sslpassword on the command line is visible to "
          "every local user; use PGPASSFILE, PGPASSWORD, " +
          EnvName(key) + " or a config file readable by the daemon only");
    }
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

const char* SourceName(Source source) {
  switch (source) {
    case Source::kDefault:
      return "default";
    case Source::kFile:
      return "file";
    case Source::kEnvironment:
      return "environment";
    case Source::kFlag:
      return "flag";
  }
  return "default";
}

}  // namespace

Invocation ParseInvocation(const std::vector<std::string>& args) {
  po::variables_map vm = ParseArgs(args);
  Invocation inv;
  ReadCommandLineOnly(vm, inv);
  if (inv.help || inv.version) return inv;

  Values flags = FlagValues(vm);
  RefuseSecretFlags(flags);
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
  return inv;
}

Millis ParseTtl(const std::string& key, const std::string& text) {
  return ToTtl(key, text);
}

Millis ParseRetention(const std::string& key, const std::string& text) {
  return ToRetention(key, text);
}

std::pair<std::string, unsigned short> ParseListen(const std::string& key,
                                                   const std::string& value) {
  std::string host;
  std::string port;
  if (!value.empty() && value.front() == '[') {
    size_t close = value.find(']');
    if (close == std::string::npos || close + 1 >= value.size() ||
        value[close + 1] != ':') {
      Invalid(key, value, "expected HOST:PORT or [IPV6]:PORT");
    }
    host = value.substr(1, close - 1);
    port = value.substr(close + 2);
  } else {
    size_t colon = value.rfind(':');
    if (colon == std::string::npos || colon == 0) {
      Invalid(key, value, "expected HOST:PORT or [IPV6]:PORT");
    }
    host = value.substr(0, colon);
    port = value.substr(colon + 1);
  }
  int p = ToInt(key, port, 0, 65535);
  return {host, static_cast<unsigned short>(p)};
}

std::string HelpText() {
  std::ostringstream out;
  out << "Usage: compactiond [COMMAND] [OPTIONS]\n\nCommands:\n"
      << cli::CommandsHelp() << "\n"
      << "Precedence: flag > COMPACTIOND_<KEY> environment variable > config "
         "file > default.\n"
         "Durations: 500ms, 30s, 5m, 1h, 1d, or combined (1h30m).\n"
         "Secrets (password, sslpassword): never on the command line; use "
         "PGPASSFILE or PGPASSWORD.\n"
         "Exit codes: 0 success, 1 runtime failure, 2 usage or configuration "
         "error.\n\n";
  out << CommandLineOnly() << "\n"
      << CommandOptions() << "\n"
      << SettingsTable() << "\n";
  return out.str();
}

std::string RenderConfig(const Invocation& inv) {
  std::ostringstream out;
  for (const SettingSpec& spec : SettingTable()) {
    std::string value = spec.format(inv.settings);
    if (spec.secret) value = MaskConninfo(value);
    const auto source = inv.sources.find(spec.name);
    out << spec.name << " = " << value << "  # "
        << SourceName(source == inv.sources.end() ? Source::kDefault
                                                  : source->second)
        << "\n";
  }
  return out.str();
}

}  // namespace compactiond
