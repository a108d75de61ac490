// Configuration: one table of settings (SettingTable(), one row per key)
// serves the command line, the config file, the environment
// (COMPACTIOND_<KEY>, '-' written as '_'), --help, --print-config and the
// SIGHUP reload. Precedence, highest first: command-line flag, environment,
// config file, built-in default (a default-constructed Settings). Every
// invalid value is a ConfigError naming its key (the process exits 2).
//
// Adding a setting: a member (with its default) in Settings, and one row in
// SettingTable() in config.cpp naming it, its help, its parser and whether
// only a restart applies it. Everything else follows from the row.
//
// Pure parsing, no I/O except reading the config file and the environment.
// Thread safety: the functions are reentrant; a Settings value is a plain
// copyable struct; the table is immutable after its first use.
#pragma once

#include <chrono>
#include <compaction/janitor.hpp>
#include <compaction/options.hpp>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "daemon/log.hpp"
#include "daemon/metrics.hpp"

namespace compactiond {

using Millis = std::chrono::milliseconds;

// Upper bounds of the duration settings; a larger value is a ConfigError
// naming the key and the bound. Each bound is far beyond any real setting
// and far within what its consumer holds.
//
// TTLs (headless-ttl, claim-ttl): 36,500 days, about 100 years, the
// library's compaction::kMaxTtl (lib/include/compaction/options.hpp). A
// larger one used to be accepted and then made every sweep fail: now() plus
// or minus it is outside PostgreSQL's timestamp range (SQLSTATE 22008).
inline constexpr Millis kMaxTtl = compaction::kMaxTtl;
// Timers (sweep intervals, refresh periods, reconnect delays,
// shutdown-timeout): one year. steady_clock counts int64 nanoseconds, about
// 292 years, and Asio adds the delay to now(); a delay near that overflows
// and the timer fires at once.
inline constexpr Millis kMaxTimer = std::chrono::hours(24 * 365);
// Server-side timeouts (statement-timeout, stats-timeout): the library's
// compaction::kMaxServerTimeout, PostgreSQL's limit.
inline constexpr Millis kMaxServerTimeout = compaction::kMaxServerTimeout;
// batch-pause: the library's compaction::kMaxBatchPause, which the Janitor
// enforces.
inline constexpr Millis kMaxBatchPause = compaction::kMaxBatchPause;

// Raised for every usage or configuration error; the message names the key.
class ConfigError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Every setting, with its built-in default: the table takes its defaults
// from a default-constructed Settings.
struct Settings {
  std::string db;  // libpq conninfo/URI; empty: PG* environment variables
  std::string schema = "compaction";
  std::string listen = "127.0.0.1:9473";
  int pool_size = 4;
  std::string application_name = "compactiond";
  Millis min_interval{std::chrono::seconds(1)};
  Millis max_interval{std::chrono::minutes(5)};
  double jitter = 0.1;
  int batch_size = 1000;
  int max_batches = 100;
  Millis statement_timeout{std::chrono::seconds(10)};
  Millis claim_ttl{std::chrono::seconds(60)};
  // Pause after each full batch (0: back to back; the library's default).
  // A paced sweep trades sweep rate for locker latency on small machines:
  // on an idle 2-core host a 1000-row batch takes about 5 ms, so 10 ms
  // between batches leaves the sweep about a third of one core and of its
  // WAL rate, still tens of thousands of rows/s per topic, far above the
  // rate at which lockers leave headless rows behind. Under full load a
  // batch takes ~30 ms and a fixed pause changes little; duty_cycle below
  // scales the pause with the batch (test/bench/RESULTS.md, Janitor).
  Millis batch_pause{std::chrono::milliseconds(10)};
  // Largest share of a sweep's time spent in batches (the library's
  // SweepOptions::duty_cycle): after a batch that took d the sweep pauses at
  // least d * (1 - duty_cycle) / duty_cycle. Unlike batch_pause this holds
  // when a saturated server makes every batch slow.
  double duty_cycle = 0.5;
  std::string owner;  // empty: host:pid
  // The log cleaner, per topic on its own timer: interval
  // clamp(min(retention, tombstone retention) / 2, cleaner-min-interval,
  // cleaner-max-interval); its batches paced like the sweep's (max-batches,
  // statement-timeout and claim-ttl are shared).
  Millis cleaner_min_interval{std::chrono::seconds(1)};
  Millis cleaner_max_interval{std::chrono::minutes(5)};
  int cleaner_batch_size = 1000;
  Millis cleaner_batch_pause{std::chrono::milliseconds(10)};
  double cleaner_duty_cycle = 0.5;
  Millis stats_interval{std::chrono::seconds(15)};
  Millis stats_timeout{std::chrono::seconds(5)};
  // Headless rows counted exactly per topic and refresh; above it the count
  // is an estimate. The library counts everything by default, which costs
  // 100-200 ms per refresh and topic at a million rows on 2 cores; 10,000
  // keeps it near 20 ms (test/bench/RESULTS.md, Stats).
  std::int64_t stats_exact_count_limit = 10000;
  Millis topic_refresh_interval{std::chrono::seconds(30)};
  // false: statements unnamed, startup settings per transaction
  // (ClientOptions::prepared_statements), for transaction poolers.
  bool prepared_statements = true;
  // Learn of topic changes over LISTEN; false, or LISTEN found not to work
  // (a transaction pooler), leaves the topic_refresh_interval polling.
  bool listen_notify = true;
  Millis reconnect_min{std::chrono::milliseconds(500)};
  Millis reconnect_max{std::chrono::seconds(10)};
  Millis shutdown_timeout{std::chrono::seconds(5)};
  LogLevel log_level = LogLevel::kInfo;
  // Which series of /metrics carry the topic label (MetricsDetail).
  MetricsDetail metrics_per_topic = MetricsDetail::kBasic;
};

// Where a setting's effective value came from.
enum class Source { kDefault, kFile, kEnvironment, kFlag };

struct Invocation {
  std::vector<std::string> command;  // e.g. {"topic", "register", "orders"}
  bool help = false;
  bool version = false;
  bool check_config = false;
  bool print_config = false;
  // The subcommands' flags given (cli/table.hpp): name without "--" →
  // its value, empty for a switch. Which command takes which is checked at
  // dispatch.
  std::map<std::string, std::string> options;
  std::string config_file;  // empty: none
  // Permission bits of the config file when it holds a secret (password or
  // sslpassword in `db`) and group or others may read it; the command line
  // warns once at start. Unset otherwise.
  std::optional<unsigned> exposed_secret_mode;
  Settings settings;
  std::map<std::string, Source> sources;  // key → origin of its value
};

// Parses `args` (argv without argv[0]) plus the environment and the config
// file named by --config or COMPACTIOND_CONFIG. With --help or --version the
// file is not read. Throws ConfigError, whose message never holds a secret:
// a conninfo with a password or sslpassword is refused on the command line,
// an invalid `db` value is not quoted, and a config-file line that does not
// parse is reported by file name and line number only.
Invocation ParseInvocation(const std::vector<std::string>& args);

// A command flag's TTL (0 < d <= kMaxTtl) and retention (0..kMaxTtl or
// "keep", kKeepForever); a ConfigError naming `key` otherwise.
Millis ParseTtl(const std::string& key, const std::string& text);
Millis ParseRetention(const std::string& key, const std::string& text);
// A command flag's count, 1..max.
int ParseCount(const std::string& key, const std::string& text, int max);

// Usage text for --help.
std::string HelpText();

// The effective configuration in config-file syntax with each value's source
// as a comment; password and sslpassword in `db` are masked.
std::string RenderConfig(const Invocation& invocation);

// One row of the settings table. Built in config.cpp from a member of
// Settings, its parser (with the bounds) and the formatter of the member's
// type, so every source, --print-config and the reload read the same row.
struct SettingSpec {
  std::string name;  // flag --NAME, file key NAME, COMPACTIOND_NAME
  std::string help;
  // Only a restart applies it (it shapes connections or sockets): a reload
  // keeps the running value and warns.
  bool restart_only = false;
  // A libpq conninfo that may hold password or sslpassword: refused on the
  // command line with one, masked in --print-config, never quoted in errors.
  bool secret = false;
  // Sets the member from `text`; throws ConfigError naming the key.
  std::function<void(Settings&, const std::string& text)> parse;
  // The member as text that `parse` reads back (unmasked).
  std::function<std::string(const Settings&)> format;
  std::function<bool(const Settings&, const Settings&)> same;
  std::function<void(Settings& to, const Settings& from)> copy;
};

// The environment variable of a setting: pool-size → COMPACTIOND_POOL_SIZE.
std::string EnvName(const std::string& key);

// Every setting, in --help and --print-config order.
const std::vector<SettingSpec>& SettingTable();

// What a SIGHUP reload applies: `fresh` with every restart-only setting kept
// at its `running` value, and the names of those that differed (ignored).
struct ReloadPlan {
  Settings settings;
  std::vector<std::string> ignored;
};
ReloadPlan PlanReload(const Settings& running, const Settings& fresh);

// "HOST:PORT" or "[V6]:PORT" split into host and port. Throws ConfigError
// naming `key`.
std::pair<std::string, unsigned short> ParseListen(const std::string& key,
                                                   const std::string& value);

}  // namespace compactiond
