#include "daemon/config.hpp"

#include <sys/stat.h>

#include <cctype>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <sstream>

#include <boost/program_options.hpp>
#include <compaction/stats.hpp>

#include "daemon/conninfo.hpp"
#include "daemon/duration.hpp"

namespace po = boost::program_options;

namespace compactiond {
namespace {

constexpr const char* kEnvPrefix = "COMPACTIOND_";

// Shortest form that reads back the same: 0.1, 0.5, 1.
std::string FormatNumber(double x) {
  std::ostringstream out;
  out << x;
  return out.str();
}

// The settings table: name, default rendered as text, help. Values are read
// as strings and converted below so every error names its key the same way,
// whichever source it came from.
struct KeySpec {
  const char* name;
  const char* help;
};

const std::vector<KeySpec>& Keys() {
  static const std::vector<KeySpec> keys = {
      {"db", "libpq conninfo or URI, without a password or sslpassword (empty: PG* variables)"},
      {"schema", "database schema holding the compaction tables"},
      {"listen", "HOST:PORT of the HTTP endpoints (run only)"},
      {"pool-size", "database connections (and worker threads) for queries"},
      {"application-name", "pg_stat_activity.application_name of connections"},
      {"min-interval", "shortest sweep interval of a topic"},
      {"max-interval", "longest sweep interval of a topic"},
      {"jitter", "fraction of the interval taken off at random, 0..0.5"},
      {"batch-size", "rows deleted per batch transaction"},
      {"max-batches", "batches per sweep of one topic"},
      {"statement-timeout", "server-side bound of one batch statement"},
      {"claim-ttl", "lifetime of a sweep's claim on its topic"},
      {"batch-pause", "pause after each full batch, 0..1m (0: none)"},
      {"duty-cycle", "largest share of a sweep's time spent in batches, (0, 1]"},
      {"owner", "name of this replica in janitor_state (empty: host:pid)"},
      {"stats-interval", "period of the statistics refresh"},
      {"stats-timeout", "statement timeout of the statistics queries"},
      {"stats-exact-count-limit", "headless rows counted exactly per topic; estimated above"},
      {"topic-refresh-interval", "period of the topic list refresh"},
      {"reconnect-min", "first retry delay after a database failure"},
      {"reconnect-max", "largest retry delay after a database failure"},
      {"shutdown-timeout", "time allowed to finish sweeps after SIGTERM"},
      {"log-level", "debug, info, warn or error"},
  };
  return keys;
}

std::map<std::string, std::string> DefaultTexts() {
  Settings d;
  return {
      {"db", d.db},
      {"schema", d.schema},
      {"listen", d.listen},
      {"pool-size", std::to_string(d.pool_size)},
      {"application-name", d.application_name},
      {"min-interval", FormatDuration(d.min_interval)},
      {"max-interval", FormatDuration(d.max_interval)},
      {"jitter", "0.1"},
      {"batch-size", std::to_string(d.batch_size)},
      {"max-batches", std::to_string(d.max_batches)},
      {"statement-timeout", FormatDuration(d.statement_timeout)},
      {"claim-ttl", FormatDuration(d.claim_ttl)},
      {"batch-pause", FormatDuration(d.batch_pause)},
      {"duty-cycle", FormatNumber(d.duty_cycle)},
      {"owner", d.owner},
      {"stats-interval", FormatDuration(d.stats_interval)},
      {"stats-timeout", FormatDuration(d.stats_timeout)},
      {"stats-exact-count-limit", std::to_string(d.stats_exact_count_limit)},
      {"topic-refresh-interval", FormatDuration(d.topic_refresh_interval)},
      {"reconnect-min", FormatDuration(d.reconnect_min)},
      {"reconnect-max", FormatDuration(d.reconnect_max)},
      {"shutdown-timeout", FormatDuration(d.shutdown_timeout)},
      {"log-level", std::string(LogLevelName(d.log_level))},
  };
}

// Settings without defaults, so that "absent" stays visible per source.
po::options_description SettingsTable() {
  po::options_description desc("Settings (flag, COMPACTIOND_* variable or config file key)");
  for (const KeySpec& k : Keys()) {
    desc.add_options()(k.name, po::value<std::string>(), k.help);
  }
  return desc;
}

po::options_description CommandLineOnly() {
  po::options_description desc("Command-line options");
  desc.add_options()
      ("help,h", "print this help and exit")
      ("version", "print the version and exit")
      ("config", po::value<std::string>(), "config file (also COMPACTIOND_CONFIG)")
      ("check-config", "validate the configuration and exit")
      ("print-config", "print the effective configuration (secrets masked) and exit")
      ("json", "stats, topic list: print JSON")
      ("once", "sweep: one pass over every topic, then exit")
      ("roles", "schema install: also create or refresh the least-privilege "
                "roles <prefix>_owner, _app, _janitor, _monitor (superuser)")
      ("role-prefix", po::value<std::string>(),
       "schema install --roles: role name prefix (default: the schema name)")
      ("headless-ttl", po::value<std::string>(), "topic register: TTL of headless rows (default 1h)");
  return desc;
}

// The positional subcommand words; parsed, never shown in --help.
po::options_description Positional() {
  po::options_description desc;
  desc.add_options()("command", po::value<std::vector<std::string>>());
  return desc;
}

std::string EnvName(const std::string& key) {
  std::string out = kEnvPrefix;
  for (char c : key) {
    out.push_back(c == '-' ? '_' : static_cast<char>(std::toupper(c)));
  }
  return out;
}

// COMPACTIOND_POOL_SIZE → pool-size; "" (ignored) for anything not a key.
std::string EnvToKey(const std::string& var) {
  std::string prefix = kEnvPrefix;
  if (var.rfind(prefix, 0) != 0) return "";
  for (const KeySpec& k : Keys()) {
    if (EnvName(k.name) == var) return k.name;
  }
  return "";
}

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
  for (const KeySpec& k : Keys()) {
    if (name == k.name) return true;
  }
  return false;
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
  std::ifstream in(path);
  if (!in) throw ConfigError("config: cannot read config file '" + path + "'");
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
                        (LooksLikeKey(name) ? " '" + name + "'" : ""));
    }
    out[name] = TrimSpace(line.substr(eq + 1));
  }
  if (in.bad()) {
    throw ConfigError("config: cannot read config file '" + path + "'");
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
  try {
    return ToValues(po::parse_environment(SettingsTable(), EnvToKey));
  } catch (const po::error& e) {
    throw ConfigError(std::string("environment: ") + e.what());
  }
}

// Keys whose value can hold a secret, and so is never quoted.
bool IsSecretKey(const std::string& key) { return key == "db"; }

[[noreturn]] void Invalid(const std::string& key, const std::string& value,
                          const std::string& why) {
  if (IsSecretKey(key)) {
    throw ConfigError("invalid value for key '" + key + "': " + why);
  }
  throw ConfigError("invalid value '" + value + "' for key '" + key + "': " +
                    why);
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
    Invalid(key, v, "must be between " + std::to_string(lo) + " and " +
                        std::to_string(hi));
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

Millis ToTimer(const std::string& key, const std::string& v) {
  return ToDuration(key, v, kMaxTimer, "one year");
}

// A pause: 0 turns it off; the library's bound is one minute.
Millis ToPause(const std::string& key, const std::string& v) {
  auto d = ParseDuration(v);
  if (!d) Invalid(key, v, "expected a duration such as 0, 10ms, 1s");
  if (*d > std::chrono::minutes(1)) Invalid(key, v, "must be at most 1m");
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

// The library's SweepOptions::duty_cycle: (0, 1], 1 adds no pause.
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

void Apply(Settings& s, const std::string& key, const std::string& v) {
  if (key == "db") {
    try {
      ConninfoParams(v);
    } catch (const std::invalid_argument& e) {
      // libpq's message points at the syntax; the value may hold a password.
      throw ConfigError("invalid value for key 'db': " + std::string(e.what()));
    }
    s.db = v;
  } else if (key == "schema") {
    CheckIdentifier(key, v);
    // The library's SQL templates name their placeholders in braces; a
    // schema called "{id}" was once rendered into another schema's name.
    if (v.find_first_of("{}") != std::string::npos) {
      Invalid(key, v, "must not contain '{' or '}'");
    }
    s.schema = v;
  } else if (key == "listen") {
    ParseListen(key, v);
    s.listen = v;
  } else if (key == "pool-size") {
    s.pool_size = ToInt(key, v, 1, 64);
  } else if (key == "application-name") {
    CheckIdentifier(key, v);
    s.application_name = v;
  } else if (key == "min-interval") {
    s.min_interval = ToTimer(key, v);
  } else if (key == "max-interval") {
    s.max_interval = ToTimer(key, v);
  } else if (key == "jitter") {
    s.jitter = ToFraction(key, v);
  } else if (key == "batch-size") {
    s.batch_size = ToInt(key, v, 1, 100000);
  } else if (key == "max-batches") {
    s.max_batches = ToInt(key, v, 1, 1000000);
  } else if (key == "statement-timeout") {
    s.statement_timeout = ToServerTimeout(key, v);
  } else if (key == "claim-ttl") {
    s.claim_ttl = ToTtl(key, v);
  } else if (key == "batch-pause") {
    s.batch_pause = ToPause(key, v);
  } else if (key == "duty-cycle") {
    s.duty_cycle = ToDutyCycle(key, v);
  } else if (key == "owner") {
    s.owner = v;
  } else if (key == "stats-interval") {
    s.stats_interval = ToTimer(key, v);
  } else if (key == "stats-timeout") {
    s.stats_timeout = ToServerTimeout(key, v);
  } else if (key == "stats-exact-count-limit") {
    s.stats_exact_count_limit =
        ToInt64(key, v, 1, compaction::StatsOptions::kCountAll);
  } else if (key == "topic-refresh-interval") {
    s.topic_refresh_interval = ToTimer(key, v);
  } else if (key == "reconnect-min") {
    s.reconnect_min = ToTimer(key, v);
  } else if (key == "reconnect-max") {
    s.reconnect_max = ToTimer(key, v);
  } else if (key == "shutdown-timeout") {
    s.shutdown_timeout = ToTimer(key, v);
  } else if (key == "log-level") {
    auto level = ParseLogLevel(v);
    if (!level) Invalid(key, v, "expected debug, info, warn or error");
    s.log_level = *level;
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
  if (s.batch_pause.count() > 0 && s.batch_pause >= s.claim_ttl) {
    // The library refuses it: a claim must outlast the pause it covers.
    Invalid("batch-pause", effective.at("batch-pause"),
            "must be shorter than claim-ttl (" + effective.at("claim-ttl") +
                ")");
  }
}

po::variables_map ParseArgs(const std::vector<std::string>& args) {
  po::options_description all;
  all.add(SettingsTable()).add(CommandLineOnly()).add(Positional());
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
  } catch (const po::error& e) {
    throw ConfigError(std::string("command line: ") + e.what());
  }
  return vm;
}

Values FlagValues(const po::variables_map& vm) {
  Values out;
  for (const KeySpec& k : Keys()) {
    if (vm.count(k.name) != 0) out[k.name] = vm[k.name].as<std::string>();
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
  inv.json = vm.count("json") != 0;
  inv.once = vm.count("once") != 0;
  inv.roles = vm.count("roles") != 0;
  if (vm.count("role-prefix") != 0) {
    inv.role_prefix = vm["role-prefix"].as<std::string>();
  }
  if (vm.count("headless-ttl") != 0) {
    inv.headless_ttl =
        ToTtl("headless-ttl", vm["headless-ttl"].as<std::string>());
  }
  if (vm.count("config") != 0) {
    inv.config_file = vm["config"].as<std::string>();
  } else if (const char* env = std::getenv("COMPACTIOND_CONFIG")) {
    inv.config_file = env;
  }
}

}  // namespace

Invocation ParseInvocation(const std::vector<std::string>& args) {
  po::variables_map vm = ParseArgs(args);
  Invocation inv;
  ReadCommandLineOnly(vm, inv);
  if (inv.help || inv.version) return inv;

  Values flags = FlagValues(vm);
  if (flags.count("db") != 0 && ConninfoHasSecret(flags["db"])) {
    throw ConfigError(
        "key 'db': a password or sslpassword on the command line is visible "
        "to every local user; use PGPASSFILE, PGPASSWORD, COMPACTIOND_DB or "
        "a config file readable by the daemon only");
  }
  Values env = ParseEnvironment();
  Values file = inv.config_file.empty() ? Values{} : ParseFile(inv.config_file);
  if (file.count("db") != 0 && ConninfoHasSecret(file["db"])) {
    inv.exposed_secret_mode = ReadableByOthers(inv.config_file);
  }

  Values effective = DefaultTexts();
  for (const KeySpec& k : Keys()) {
    // Highest precedence first: the first source holding the key wins.
    const std::string key = k.name;
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
    Apply(inv.settings, key, effective[key]);
  }
  CheckRelations(inv.settings, effective);
  return inv;
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
  out << "Usage: compactiond [COMMAND] [OPTIONS]\n\n"
         "Commands:\n"
         "  run                       sweep every topic on timers and serve "
         "/metrics, /healthz, /readyz (default)\n"
         "  sweep --once              one sweep of every topic; exit 1 if any "
         "failed\n"
         "  stats [--json]            headless rows and janitor state per "
         "topic\n"
         "  schema install            create the schema (idempotent)\n"
         "  topic register NAME... [--headless-ttl DURATION]\n"
         "  topic list [--json]\n\n"
         "Precedence: flag > COMPACTIOND_<KEY> environment variable > config "
         "file > default.\n"
         "Durations: 500ms, 30s, 5m, 1h, 1d, or combined (1h30m).\n"
         "Secrets (password, sslpassword): never on the command line; use "
         "PGPASSFILE or PGPASSWORD.\n"
         "Exit codes: 0 success, 1 runtime failure, 2 usage or configuration "
         "error.\n\n";
  out << CommandLineOnly() << "\n" << SettingsTable() << "\n";
  return out.str();
}

std::string RenderConfig(const Invocation& inv) {
  Values effective = DefaultTexts();
  const Settings& s = inv.settings;
  effective["db"] = MaskConninfo(s.db);
  effective["schema"] = s.schema;
  effective["listen"] = s.listen;
  effective["pool-size"] = std::to_string(s.pool_size);
  effective["application-name"] = s.application_name;
  effective["min-interval"] = FormatDuration(s.min_interval);
  effective["max-interval"] = FormatDuration(s.max_interval);
  effective["jitter"] = FormatNumber(s.jitter);
  effective["batch-size"] = std::to_string(s.batch_size);
  effective["max-batches"] = std::to_string(s.max_batches);
  effective["statement-timeout"] = FormatDuration(s.statement_timeout);
  effective["claim-ttl"] = FormatDuration(s.claim_ttl);
  effective["batch-pause"] = FormatDuration(s.batch_pause);
  effective["duty-cycle"] = FormatNumber(s.duty_cycle);
  effective["owner"] = s.owner;
  effective["stats-interval"] = FormatDuration(s.stats_interval);
  effective["stats-timeout"] = FormatDuration(s.stats_timeout);
  effective["stats-exact-count-limit"] = std::to_string(s.stats_exact_count_limit);
  effective["topic-refresh-interval"] = FormatDuration(s.topic_refresh_interval);
  effective["reconnect-min"] = FormatDuration(s.reconnect_min);
  effective["reconnect-max"] = FormatDuration(s.reconnect_max);
  effective["shutdown-timeout"] = FormatDuration(s.shutdown_timeout);
  effective["log-level"] = std::string(LogLevelName(s.log_level));

  std::ostringstream out;
  for (const KeySpec& k : Keys()) {
    const char* source = "default";
    switch (inv.sources.count(k.name) ? inv.sources.at(k.name)
                                      : Source::kDefault) {
      case Source::kDefault: source = "default"; break;
      case Source::kFile: source = "file"; break;
      case Source::kEnvironment: source = "environment"; break;
      case Source::kFlag: source = "flag"; break;
    }
    out << k.name << " = " << effective[k.name] << "  # " << source << "\n";
  }
  return out.str();
}

}  // namespace compactiond
