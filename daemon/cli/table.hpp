// The subcommands as one table, one row each: its words, positional
// arguments, flags, help line and handler. --help's command list and
// command options, the check of which flag goes with which command, the
// usage errors and the dispatch all come from the rows.
//
// Adding a subcommand: one row in CommandTable() (table.cpp) and its
// handler in cli/. A flag several commands share is one Flag value, so its
// help reads the same everywhere.
//
// Thread safety: the table is immutable after its first use; Dispatch is
// called once, from main().
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "daemon/config.hpp"

namespace compactiond::cli {

struct Flag {
  std::string name;   // without the leading "--"
  std::string value;  // metavariable of its value ("D"); empty: a switch
  std::string help;   // what it does, without the commands' names
  bool required = false;
};

// What a handler gets: the parsed invocation and the words after the
// command's own.
struct Call {
  const std::vector<std::string>& argv;  // as given, for `run`'s reload
  Invocation& inv;
  std::vector<std::string> args;

  bool Has(const std::string& flag) const;
  // The flag's value; nullopt when it was not given.
  std::optional<std::string> Value(const std::string& flag) const;
};

inline constexpr std::size_t kAnyCount = static_cast<std::size_t>(-1);

struct Command {
  std::vector<std::string> words;  // {"topic", "register"}
  std::string args;                // usage of the arguments: "NAME..."
  std::size_t min_args = 0;
  std::size_t max_args = 0;  // kAnyCount: no limit
  std::vector<Flag> flags;   // the only flags the command accepts
  std::string help;
  std::function<int(Call&)> run;

  std::string Name() const;   // "topic register"
  std::string Usage() const;  // "topic register NAME... [--retention D]"
};

// Every subcommand, in --help order; the first is the default (`run`).
const std::vector<Command>& CommandTable();

// Every flag of the table once, its help prefixed by the commands that take
// it ("stats, topic list: print JSON"), for the option parser and --help.
std::vector<Flag> CommandFlags();

// The "Commands:" block of --help, one line per command.
std::string CommandsHelp();

// Finds the row for `inv.command`, checks the arguments and flags against
// it (a ConfigError naming the misuse otherwise) and runs its handler.
int Dispatch(const std::vector<std::string>& argv, Invocation& inv);

}  // namespace compactiond::cli
