// Parses the command line, checks which options go with which subcommand
// and dispatches to the App (`run`) or a one-shot command in cli/.
#include "daemon/cli.hpp"

#include <compaction/errors.hpp>
#include <cstdio>
#include <iostream>
#include <string>

#include "daemon/app.hpp"
#include "daemon/cli/commands.hpp"
#include "daemon/config.hpp"
#include "daemon/conninfo.hpp"
#include "daemon/failure.hpp"
#include "daemon/log.hpp"
#include "daemon/version.hpp"

namespace compactiond {
namespace {

std::string Command(const Invocation& inv) {
  std::string out;
  for (const auto& w : inv.command) out += (out.empty() ? "" : " ") + w;
  return out.empty() ? "run" : out;
}

// Rejects options given to a subcommand that does not take them.
void CheckOptionUse(const Invocation& inv, const std::string& command) {
  bool json_ok = command == "stats" || command == "topic list" ||
                 command == "consumer list";
  if (inv.json && !json_ok) {
    throw ConfigError(
        "option '--json' is for 'stats', 'topic list' and 'consumer list'");
  }
  if ((inv.to_start || inv.to_end) && command.rfind("consumer reset", 0) != 0) {
    throw ConfigError(std::string("option '") +
                      (inv.to_start ? "--to-start" : "--to-end") +
                      "' is for 'consumer reset'");
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
  if (inv.yes && command.rfind("topic destroy", 0) != 0) {
    throw ConfigError("option '--yes' is for 'topic destroy'");
  }
  if (inv.roles && command != "schema install") {
    throw ConfigError("option '--roles' is for 'schema install'");
  }
  if (!inv.role_prefix.empty() && !inv.roles) {
    throw ConfigError("option '--role-prefix' needs 'schema install --roles'");
  }
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

// libpq's messages span lines ("\n\tIs the server running..."); one line
// per error keeps the format greppable.
void PrintError(const std::string& message) {
  std::string line;
  for (char c : message) {
    if (c == '\n' || c == '\t') {
      if (!line.empty() && line.back() != ' ') line.push_back(' ');
    } else {
      line.push_back(c);
    }
  }
  while (!line.empty() && line.back() == ' ') line.pop_back();
  std::cerr << "compactiond: " << line << "\n";
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
    return cli::SweepOnce(s);
  }
  if (command == "stats") return cli::Stats(s, inv.json);
  if (command == "schema install") {
    return cli::SchemaInstall(s, inv.roles, inv.role_prefix);
  }
  if (command == "topic list") return cli::TopicList(s, inv.json);
  if (w.size() >= 3 && w[0] == "topic" && w[1] == "register") {
    return cli::TopicRegister(s, {w.begin() + 2, w.end()}, inv);
  }
  if (w.size() >= 2 && w[0] == "topic" && w[1] == "destroy") {
    if (w.size() != 3) throw ConfigError("usage: topic destroy NAME --yes");
    if (!inv.yes) {
      throw ConfigError("topic destroy drops topic '" + w[2] +
                        "' with all its messages and cannot be undone; "
                        "confirm with --yes");
    }
    return cli::TopicDestroy(s, w[2]);
  }
  if (command == "consumer list") return cli::ConsumerList(s, inv.json);
  if (w.size() >= 2 && w[0] == "consumer" && w[1] == "reset") {
    if (w.size() != 4 || inv.to_start == inv.to_end) {
      throw ConfigError(
          "usage: consumer reset TOPIC NAME --to-start|--to-end (exactly one)");
    }
    return cli::ConsumerReset(s, w[2], w[3], inv.to_end);
  }
  if (w.size() >= 2 && w[0] == "consumer" && w[1] == "drop") {
    if (w.size() != 4) throw ConfigError("usage: consumer drop TOPIC NAME");
    return cli::ConsumerDrop(s, w[2], w[3]);
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
    // One format for every error that ends a command, config or runtime:
    // "compactiond: <what went wrong>" on one line, for people. The daemon's
    // own log while it runs is logfmt.
    PrintError(e.what());
    return kExitUsage;
  } catch (const compaction::InvalidArgument&) {
    PrintError(Describe(std::current_exception()));
    return kExitUsage;
  } catch (const std::exception&) {
    PrintError(Describe(std::current_exception()));
    return kExitFailure;
  }
}

}  // namespace compactiond
