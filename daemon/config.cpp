// The settings table, its formatters and what reads the whole table: the
// reload plan and --print-config.
#include "daemon/config.hpp"

#include <charconv>
#include <compaction/stats.hpp>
#include <type_traits>

#include "daemon/config_parse.hpp"
#include "daemon/conninfo.hpp"
#include "daemon/duration.hpp"

namespace compactiond {
namespace {

using namespace detail;  // NOLINT: the parsers name every row

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
              &S::duty_cycle, ToNumber),
      Setting("owner",
              "name of this replica in janitor_state (empty: host:pid)",
              &S::owner, ToOwner),
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
              &S::cleaner_duty_cycle, ToNumber),
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

namespace detail {

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

bool IsSettingKey(const std::string& name) {
  return FindSetting(name) != nullptr;
}

}  // namespace detail
}  // namespace compactiond
