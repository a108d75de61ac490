// Unit tests of the command table: --help, the option checks and the usage
// errors all come from its rows (no database: each case fails before a
// handler connects).
#include <catch2/catch.hpp>
#include <set>
#include <string>
#include <vector>

#include "daemon/cli/table.hpp"
#include "daemon/config.hpp"

namespace compactiond::cli {
namespace {

// The ConfigError dispatching `args` raises, or "" when a handler ran
// (none does: the database is unreachable, so that is an error too).
std::string DispatchError(const std::vector<std::string>& args) {
  Invocation inv = ParseInvocation(args);
  try {
    Dispatch(args, inv);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST_CASE("every row is in --help with its usage, every flag once") {
  const std::string help = HelpText();
  std::set<std::string> names;
  for (const Command& c : CommandTable()) {
    INFO(c.Name());
    CHECK(names.insert(c.Name()).second);
    const size_t at = help.find("\n  " + c.Usage() + "  ");
    REQUIRE(at != std::string::npos);
    CHECK(help.substr(at, help.find('\n', at + 1) - at).find(c.help) !=
          std::string::npos);
    for (const Flag& f : c.flags) {
      CHECK(help.find("--" + f.name + " ") != std::string::npos);
    }
  }
  CHECK(CommandTable().front().Name() == "run");
  std::set<std::string> flags;
  for (const Flag& f : CommandFlags()) CHECK(flags.insert(f.name).second);
  CHECK(flags.count("json") == 1);
}

TEST_CASE("a flag is refused by a command without it, naming its commands") {
  CHECK(DispatchError({"sweep", "--once", "--json"}) ==
        "option '--json' is for 'stats', 'topic list', 'topic tail' and "
        "'consumer list'");
  CHECK(DispatchError({"stats", "--yes"}) ==
        "option '--yes' is for 'topic destroy'");
  CHECK(DispatchError({"--retention", "1d"}) ==
        "option '--retention' is for 'topic register'");
}

TEST_CASE("arguments and required flags are checked against the row") {
  CHECK(DispatchError({"topic", "register"}) ==
        "usage: topic register NAME... [--headless-ttl D] "
        "[--retention D|keep] [--tombstone-retention D|keep] "
        "[--partitions N]");
  CHECK(DispatchError({"consumer", "drop", "t"}) ==
        "usage: consumer drop TOPIC NAME");
  CHECK(DispatchError({"stats", "extra"}) == "usage: stats [--json]");
  CHECK_THAT(DispatchError({"topic", "destroy", "t"}),
             Catch::StartsWith("'topic destroy' needs --yes"));
  CHECK_THAT(DispatchError({"sweep"}),
             Catch::StartsWith("'sweep' needs --once"));
  CHECK(DispatchError({"topic", "frob"}) ==
        "unknown command 'topic frob' (see --help)");
  // A typo of a command gets its name; arguments after it do not matter.
  CHECK(DispatchError({"stat"}) ==
        "unknown command 'stat' (did you mean 'stats'? see --help)");
  CHECK(DispatchError({"topic", "lst"}) ==
        "unknown command 'topic lst' (did you mean 'topic list'? see --help)");
  CHECK(DispatchError({"topic", "regster", "orders"}) ==
        "unknown command 'topic regster orders' (did you mean 'topic "
        "register'? see --help)");
  // Nothing is suggested for what is not quoted (a password, perhaps).
  CHECK(DispatchError({"Stats1"}) ==
        "unknown command (not shown: a word of it is not a command word, a-z "
        "and '-' only; a conninfo goes in --db or the config file; see "
        "--help)");
  CHECK_THAT(DispatchError({"consumer", "reset", "t", "c"}),
             Catch::Contains("exactly one"));
  CHECK(DispatchError({"schema", "install", "--role-prefix", "p"}) ==
        "option '--role-prefix' needs 'schema install --roles'");
}

TEST_CASE("a flag's value is checked before anything connects") {
  CHECK_THAT(DispatchError({"topic", "register", "t", "--retention", "x"}),
             Catch::Contains("'retention'"));
}

}  // namespace
}  // namespace compactiond::cli
