#include "daemon/cli.hpp"

#include <cstdio>
#include <iomanip>
#include <iostream>
#include <mutex>
#include <sstream>
#include <thread>

#include <compaction/compaction.hpp>
#include <nlohmann/json.hpp>

#include "daemon/app.hpp"
#include "daemon/config.hpp"
#include "daemon/conninfo.hpp"
#include "daemon/duration.hpp"
#include "daemon/failure.hpp"
#include "daemon/log.hpp"
#include "daemon/scheduler.hpp"
#include "daemon/version.hpp"

namespace compactiond {
namespace {

using Clock = std::chrono::system_clock;

double Seconds(std::chrono::milliseconds d) {
  return std::chrono::duration<double>(d).count();
}

nlohmann::json Timestamp(const std::optional<Clock::time_point>& t) {
  if (!t) return nullptr;
  return std::chrono::duration<double>(t->time_since_epoch()).count();
}

compaction::Client Connect(const Settings& s) {
  return compaction::Client::Connect(ConnectionParams(s), ClientOptionsFor(s));
}

std::string Command(const Invocation& inv) {
  std::string out;
  for (const auto& w : inv.command) out += (out.empty() ? "" : " ") + w;
  return out.empty() ? "run" : out;
}

// Rejects options given to a subcommand that does not take them.
void CheckOptionUse(const Invocation& inv, const std::string& command) {
  bool json_ok = command == "stats" || command == "topic list";
  if (inv.json && !json_ok) {
    throw ConfigError("option '--json' is for 'stats' and 'topic list'");
  }
  if (inv.once && command != "sweep") {
    throw ConfigError("option '--once' is for 'sweep'");
  }
  for (const auto& [given, flag] :
       {std::pair{inv.headless_ttl.has_value(), "--headless-ttl"},
        std::pair{inv.retention.has_value(), "--retention"},
        std::pair{inv.tombstone_retention.has_value(),
                  "--tombstone-retention"}}) {
    if (given && command.rfind("topic register", 0) != 0) {
      throw ConfigError(std::string("option '") + flag +
                        "' is for 'topic register'");
    }
  }
  if (inv.roles && command != "schema install") {
    throw ConfigError("option '--roles' is for 'schema install'");
  }
  if (!inv.role_prefix.empty() && !inv.roles) {
    throw ConfigError("option '--role-prefix' needs 'schema install --roles'");
  }
}

int SweepOnce(const Settings& s) {
  compaction::Client client = Connect(s);
  std::vector<compaction::TopicInfo> topics = client.ListTopics();
  const ScheduleSettings schedule = ScheduleSettings::From(s);
  std::mutex mu;
  size_t next = 0;
  int failed = 0;
  auto worker = [&] {
    compaction::Janitor janitor(client);
    for (;;) {
      std::string name;
      {
        std::lock_guard lock(mu);
        if (next == topics.size()) return;
        name = topics[next++].name;
      }
      try {
        // The headless sweep, then the log cleaner, each as `run` does.
        compaction::SweepResult r = janitor.SweepHeadless(name, schedule.sweep);
        {
          std::lock_guard lock(mu);
          std::cout << "topic=" << name << " deleted=" << r.deleted
                    << " batches=" << r.batches << " status="
                    << (r.skipped ? "skipped claimed_by=" + r.claimed_by : "ok")
                    << "\n";
        }
        compaction::CompactResult c =
            janitor.CompactLog(name, schedule.cleaner);
        std::lock_guard lock(mu);
        std::cout << "topic=" << name << " cleaner deleted_messages="
                  << c.deleted_messages
                  << " tombstones_expired=" << c.tombstones_expired
                  << " batches=" << c.batches << " status="
                  << (c.skipped ? "skipped claimed_by=" + c.claimed_by : "ok")
                  << "\n";
      } catch (const std::exception&) {
        std::string error = Describe(std::current_exception());
        std::lock_guard lock(mu);
        ++failed;
        LogError("sweep", "sweep failed", {{"topic", name}, {"error", error}});
        std::cout << "topic=" << name << " status=failed\n";
      }
    }
  };
  std::vector<std::thread> threads;
  for (int i = 0; i < s.pool_size; ++i) threads.emplace_back(worker);
  for (auto& t : threads) t.join();
  std::cout.flush();
  LogInfo("sweep", "pass finished",
          {{"topics", static_cast<std::int64_t>(topics.size())},
           {"failed", failed}});
  return failed == 0 ? kExitOk : kExitFailure;
}

// A retention as seconds for JSON; kKeepForever is null.
nlohmann::json RetentionJson(Millis d) {
  if (d == compaction::kKeepForever) return nullptr;
  return Seconds(d);
}

// A retention for people: "keep" or a duration.
std::string RetentionText(Millis d) {
  return d == compaction::kKeepForever ? "keep" : FormatDuration(d);
}

nlohmann::json RunJson(const compaction::JanitorState& j) {
  return {{"last_sweep_started_at", Timestamp(j.last_sweep_started_at)},
          {"last_sweep_finished_at", Timestamp(j.last_sweep_finished_at)},
          {"last_success_at", Timestamp(j.last_success_at)},
          {"last_deleted_rows", j.last_deleted_rows},
          {"total_deleted_rows", j.total_deleted_rows},
          {"last_error", j.last_error},
          {"claimed_by", j.claimed_by}};
}

nlohmann::json StatsJson(const compaction::TopicOverview& t) {
  return {
      {"topic", t.info.name},
      {"id", t.info.id},
      {"headless_ttl_seconds", Seconds(t.info.headless_ttl)},
      {"headless_rows", t.stats.headless_rows},
      {"headless_rows_estimated", t.stats.headless_rows_estimated},
      {"headless_oldest_age_seconds", Seconds(t.stats.oldest_headless_age)},
      {"estimated_head_rows", t.stats.estimated_head_rows},
      {"janitor", RunJson(t.stats.janitor)},
      {"retention_seconds", RetentionJson(t.info.retention)},
      {"tombstone_retention_seconds",
       RetentionJson(t.info.tombstone_retention)},
      {"log_messages_estimated", t.stats.estimated_messages},
      {"tombstoned_keys", t.stats.tombstoned_keys},
      {"cleaner_lag_seconds", Seconds(t.stats.cleaner_lag)},
      {"cleaner", RunJson(t.stats.cleaner)},
      {"tombstones_expired_total", t.stats.total_tombstones_expired},
      // Non-empty when this topic's stats could not be read (the rest of
      // the object is then zero).
      {"stats_error", t.error},
  };
}

// "~" marks a count above stats-exact-count-limit, estimated.
std::string HeadlessText(const compaction::TopicStats& stats) {
  return (stats.headless_rows_estimated ? "~" : "") +
         std::to_string(stats.headless_rows);
}

// The topic's error: unreadable stats, else the sweep's, else the cleaner's.
std::string LastError(const compaction::TopicOverview& t) {
  if (!t.error.empty()) return "stats unreadable: " + t.error;
  if (!t.stats.janitor.last_error.empty()) return t.stats.janitor.last_error;
  if (!t.stats.cleaner.last_error.empty()) {
    return "cleaner: " + t.stats.cleaner.last_error;
  }
  return "";
}

int Stats(const Settings& s, bool json) {
  compaction::Client client = Connect(s);
  compaction::StatsOptions options;
  options.exact_count_limit = s.stats_exact_count_limit;
  auto all = client.ListTopicStats(options);
  if (json) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& t : all) out.push_back(StatsJson(t));
    std::cout << out.dump(2) << "\n";
    return kExitOk;
  }
  std::cout << std::left << std::setw(32) << "TOPIC" << std::setw(10) << "TTL"
            << std::setw(12) << "HEADLESS" << std::setw(14) << "OLDEST_AGE_S"
            << std::setw(14) << "DELETED_TOTAL" << std::setw(12) << "LOG_MSGS"
            << std::setw(12) << "TOMBSTONED" << std::setw(14) << "CLEANER_LAG_S"
            << "LAST_ERROR\n";
  for (const auto& t : all) {
    std::ostringstream age;
    age << std::fixed << std::setprecision(1)
        << Seconds(t.stats.oldest_headless_age);
    std::ostringstream lag;
    lag << std::fixed << std::setprecision(1) << Seconds(t.stats.cleaner_lag);
    std::cout << std::left << std::setw(32) << t.info.name << std::setw(10)
              << FormatDuration(t.info.headless_ttl) << std::setw(12)
              << HeadlessText(t.stats) << std::setw(14) << age.str()
              << std::setw(14) << t.stats.janitor.total_deleted_rows
              << std::setw(12)
              << ("~" + std::to_string(t.stats.estimated_messages))
              << std::setw(12) << t.stats.tombstoned_keys << std::setw(14)
              << lag.str() << LastError(t) << "\n";
  }
  return kExitOk;
}

int TopicList(const Settings& s, bool json) {
  compaction::Client client = Connect(s);
  auto topics = client.ListTopics();
  if (json) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& t : topics) {
      out.push_back(
          {{"id", t.id},
           {"name", t.name},
           {"headless_ttl_seconds", Seconds(t.headless_ttl)},
           {"retention_seconds", RetentionJson(t.retention)},
           {"tombstone_retention_seconds",
            RetentionJson(t.tombstone_retention)}});
    }
    std::cout << out.dump(2) << "\n";
    return kExitOk;
  }
  std::cout << std::left << std::setw(8) << "ID" << std::setw(32) << "TOPIC"
            << std::setw(10) << "TTL" << std::setw(12) << "RETENTION"
            << "TOMBSTONE_RETENTION\n";
  for (const auto& t : topics) {
    std::cout << std::left << std::setw(8) << t.id << std::setw(32) << t.name
              << std::setw(10) << FormatDuration(t.headless_ttl)
              << std::setw(12) << RetentionText(t.retention)
              << RetentionText(t.tombstone_retention) << "\n";
  }
  return kExitOk;
}

// Several names register one after another on one connection.
int TopicRegister(const Settings& s, const std::vector<std::string>& names,
                  const Invocation& inv) {
  compaction::Client client = Connect(s);
  compaction::TopicConfig config;
  config.headless_ttl = inv.headless_ttl;
  config.retention = inv.retention;
  config.tombstone_retention = inv.tombstone_retention;
  for (const std::string& name : names) {
    compaction::TopicInfo info =
        client.Topic<compaction::RawMessage>(name).Register(config);
    std::cout << "registered topic=" << info.name << " id=" << info.id
              << " headless_ttl=" << FormatDuration(info.headless_ttl)
              << " retention=" << RetentionText(info.retention)
              << " tombstone_retention="
              << RetentionText(info.tombstone_retention) << "\n";
  }
  return kExitOk;
}

int SchemaInstall(const Settings& s, bool roles,
                  const std::string& role_prefix) {
  compaction::Client client = Connect(s);
  client.InstallSchema();
  std::cout << "schema installed: " << s.schema << "\n";
  if (roles) {
    client.InstallRoles(role_prefix);
    const std::string p = role_prefix.empty() ? s.schema : role_prefix;
    std::cout << "roles installed: " << p << "_owner, " << p << "_app, " << p
              << "_janitor, " << p << "_monitor\n";
  }
  return kExitOk;
}

// Once per process: a reload re-reads the file but does not warn again.
void WarnAboutExposedSecret(const Invocation& inv) {
  if (!inv.exposed_secret_mode) return;
  char mode[8];
  std::snprintf(mode, sizeof mode, "%04o", *inv.exposed_secret_mode);
  LogWarn("config",
          "config file holds a password or sslpassword and is readable by "
          "group or others; chmod 0600 it, or use a passfile (PGPASSFILE)",
          {{"file", inv.config_file}, {"mode", std::string(mode)}});
}

int Dispatch(const std::vector<std::string>& args, Invocation& inv) {
  const std::string command = Command(inv);
  CheckOptionUse(inv, command);
  const Settings& s = inv.settings;
  const auto& w = inv.command;
  if (command == "run") return App(args, std::move(inv)).Run();
  if (command == "sweep") {
    if (!inv.once) {
      throw ConfigError("'sweep' needs --once (use 'run' to sweep on timers)");
    }
    return SweepOnce(s);
  }
  if (command == "stats") return Stats(s, inv.json);
  if (command == "schema install") {
    return SchemaInstall(s, inv.roles, inv.role_prefix);
  }
  if (command == "topic list") return TopicList(s, inv.json);
  if (w.size() >= 3 && w[0] == "topic" && w[1] == "register") {
    return TopicRegister(s, {w.begin() + 2, w.end()}, inv);
  }
  if (w.size() == 2 && w[0] == "topic" && w[1] == "register") {
    throw ConfigError(
        "usage: topic register NAME... [--headless-ttl DURATION] "
        "[--retention DURATION|keep] [--tombstone-retention DURATION|keep]");
  }
  throw ConfigError("unknown command '" + command + "' (see --help)");
}

}  // namespace

int RunCommandLine(const std::vector<std::string>& args) {
  try {
    Invocation inv = ParseInvocation(args);
    if (inv.help) {
      std::cout << HelpText();
      return kExitOk;
    }
    if (inv.version) {
      std::cout << "compactiond " << Version() << "\n";
      return kExitOk;
    }
    SetLogLevel(inv.settings.log_level);
    WarnAboutExposedSecret(inv);
    ConnectionParams(inv.settings);  // the conninfo must parse
    if (inv.print_config) {
      std::cout << RenderConfig(inv);
      return kExitOk;
    }
    if (inv.check_config) {
      std::cout << "configuration ok\n";
      return kExitOk;
    }
    return Dispatch(args, inv);
  } catch (const ConfigError& e) {
    std::cerr << "compactiond: " << e.what() << "\n";
    return kExitUsage;
  } catch (const compaction::InvalidArgument&) {
    LogError("cli", "invalid argument",
             {{"error", Describe(std::current_exception())}});
    return kExitUsage;
  } catch (const std::exception&) {
    LogError("cli", "command failed",
             {{"error", Describe(std::current_exception())}});
    return kExitFailure;
  }
}

}  // namespace compactiond
