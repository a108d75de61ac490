// Parses the command line, answers --help, --version, --check-config and
// --print-config, runs the subcommand (table.hpp) and maps its errors to an
// exit code and one line on stderr.
#include <compaction/errors.hpp>
#include <cstdio>
#include <iostream>
#include <string>

#include "daemon/cli/cli.hpp"
#include "daemon/cli/table.hpp"
#include "daemon/config.hpp"
#include "daemon/conninfo.hpp"
#include "daemon/failure.hpp"
#include "daemon/log.hpp"
#include "daemon/version.hpp"

namespace compactiond {
namespace {

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
    return cli::Dispatch(args, inv);
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
