// The command line: settings as flags, the options of the command line
// alone, the subcommands' flags (from the command table), and --help.
#include <algorithm>
#include <sstream>

#include "daemon/cli/table.hpp"
#include "daemon/config_parse.hpp"
#include "daemon/conninfo.hpp"
#include "daemon/suggest.hpp"

namespace po = boost::program_options;

namespace compactiond::detail {

// Settings without defaults, so that "absent" stays visible per source.
po::options_description SettingsOptions() {
  po::options_description desc(
      "Settings (flag, COMPACTIOND_* variable or config file key)");
  for (const SettingSpec& spec : SettingTable()) {
    desc.add_options()(spec.name.c_str(), po::value<std::string>(),
                       spec.help.c_str());
  }
  return desc;
}

namespace {

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

std::string Flag(const std::string& key) { return "--" + key; }

// The error for an option that names nothing. Only its name is quoted, and
// only when it looks like one: Boost's own message quotes the whole word,
// value included, and a mistyped "--DB=host=h password=pw" must not put the
// password on stderr (the journal, the container log).
std::string UnknownOption(const std::string& word) {
  const size_t dashes = std::min(word.find_first_not_of('-'), word.size());
  // A short option takes what follows its letter as its value ("-pVALUE").
  const size_t end = dashes == 1 ? 2 : word.find('=');
  const std::string key = word.substr(dashes, end - dashes);
  if (!LooksLikeKey(key)) {
    return "an unrecognised option (not shown: it does not look like an "
           "option name; a conninfo goes in --db or the config file)";
  }
  return "unrecognised option '" + word.substr(0, dashes) + key + "'" +
         DidYouMeanSetting(key, Flag);
}

po::variables_map ParseArgs(const std::vector<std::string>& args) {
  po::options_description all;
  all.add(SettingsOptions())
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
    throw ConfigError("command line: " + UnknownOption(e.get_option_name()));
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

}  // namespace

Values ReadCommandLine(const std::vector<std::string>& args, Invocation& inv) {
  po::variables_map vm = ParseArgs(args);
  ReadCommandLineOnly(vm, inv);
  if (inv.help || inv.version) return {};
  Values flags = FlagValues(vm);
  RefuseSecretFlags(flags);
  return flags;
}

}  // namespace compactiond::detail

namespace compactiond {

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
  out << detail::CommandLineOnly() << "\n"
      << detail::CommandOptions() << "\n"
      << detail::SettingsOptions() << "\n";
  return out.str();
}

}  // namespace compactiond
