// The command table and what comes from it: usage lines, --help's command
// list, the flag checks and the dispatch.
#include "daemon/cli/table.hpp"

#include <algorithm>
#include <compaction/compaction.hpp>
#include <sstream>

#include "daemon/app.hpp"
#include "daemon/cli/cli.hpp"
#include "daemon/cli/commands.hpp"
#include "daemon/suggest.hpp"

namespace compactiond::cli {
namespace {

const Flag kJson{"json", "", "print JSON"};

Millis TtlFlag(const Call& c, const std::string& flag) {
  return ParseTtl(flag, *c.Value(flag));
}

std::optional<Millis> RetentionFlag(const Call& c, const std::string& flag) {
  auto v = c.Value(flag);
  if (!v) return std::nullopt;
  return ParseRetention(flag, *v);
}

int RunTopicRegister(Call& c) {
  compaction::TopicConfig config;
  if (c.Has("headless-ttl")) config.headless_ttl = TtlFlag(c, "headless-ttl");
  config.retention = RetentionFlag(c, "retention");
  config.tombstone_retention = RetentionFlag(c, "tombstone-retention");
  if (auto n = c.Value("partitions")) {
    config.partitions =
        ParseCount("partitions", *n, compaction::kMaxPartitions);
  }
  return TopicRegister(c.inv.settings, c.args, config);
}

int RunSchemaInstall(Call& c) {
  const auto prefix = c.Value("role-prefix");
  if (prefix && !c.Has("roles")) {
    throw ConfigError("option '--role-prefix' needs 'schema install --roles'");
  }
  return SchemaInstall(c.inv.settings, c.Has("roles"), prefix.value_or(""));
}

int RunConsumerReset(Call& c) {
  if (c.Has("to-start") == c.Has("to-end")) {
    throw ConfigError(
        "usage: consumer reset TOPIC NAME --to-start|--to-end "
        "(exactly one)");
  }
  return ConsumerReset(c.inv.settings, c.args[0], c.args[1], c.Has("to-end"));
}

std::string Join(const std::vector<std::string>& words, const char* sep) {
  std::string out;
  for (const auto& w : words) out += (out.empty() ? "" : sep) + w;
  return out;
}

// "'a'", "'a' and 'b'", "'a', 'b' and 'c'"
std::string Names(const std::vector<std::string>& names) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) out += i + 1 == names.size() ? " and " : ", ";
    out += "'" + names[i] + "'";
  }
  return out;
}

std::vector<std::string> CommandsTaking(const std::string& flag) {
  std::vector<std::string> out;
  for (const Command& c : CommandTable()) {
    for (const Flag& f : c.flags) {
      if (f.name == flag) out.push_back(c.Name());
    }
  }
  return out;
}

// The longest row whose words begin the command line's.
const Command* Find(const std::vector<std::string>& words) {
  const Command* best = nullptr;
  for (const Command& c : CommandTable()) {
    if (c.words.size() > words.size()) continue;
    if (!std::equal(c.words.begin(), c.words.end(), words.begin())) continue;
    if (best == nullptr || c.words.size() > best->words.size()) best = &c;
  }
  return best;
}

// "did you mean 'stats'? " when the command line's first words are a typo
// of one command's words (suggest.hpp's Closest, same word count), or "".
std::string DidYouMeanCommand(const std::vector<std::string>& words) {
  for (std::size_t n = words.size(); n > 0; --n) {
    std::vector<std::string> names;
    for (const Command& c : CommandTable()) {
      if (c.words.size() == n) names.push_back(c.Name());
    }
    const std::vector<std::string> first(words.begin(), words.begin() + n);
    if (auto near = Closest(Join(first, " "), names)) {
      return "did you mean '" + *near + "'? ";
    }
  }
  return "";
}

void CheckUse(const Command& command, const Call& call) {
  for (const auto& [name, value] : call.inv.options) {
    const bool taken =
        std::any_of(command.flags.begin(), command.flags.end(),
                    [&name = name](const Flag& f) { return f.name == name; });
    if (!taken) {
      throw ConfigError("option '--" + name + "' is for " +
                        Names(CommandsTaking(name)));
    }
  }
  const size_t n = call.args.size();
  if (n < command.min_args || n > command.max_args) {
    throw ConfigError("usage: " + command.Usage());
  }
  for (const Flag& f : command.flags) {
    if (f.required && !call.Has(f.name)) {
      throw ConfigError("'" + command.Name() + "' needs --" + f.name + ": " +
                        f.help);
    }
  }
}

}  // namespace

bool Call::Has(const std::string& flag) const {
  return inv.options.count(flag) != 0;
}

std::optional<std::string> Call::Value(const std::string& flag) const {
  auto it = inv.options.find(flag);
  if (it == inv.options.end()) return std::nullopt;
  return it->second;
}

std::string Command::Name() const { return Join(words, " "); }

std::string Command::Usage() const {
  std::string out = Name();
  if (!args.empty()) out += " " + args;
  for (const Flag& f : flags) {
    // A flag the argument text already shows ("--to-start|--to-end").
    if (args.find("--" + f.name) != std::string::npos) continue;
    std::string shown = "--" + f.name + (f.value.empty() ? "" : " " + f.value);
    out += " " + (f.required ? shown : "[" + shown + "]");
  }
  return out;
}

const std::vector<Command>& CommandTable() {
  static const std::vector<Command> table = {
      {{"run"},
       "",
       0,
       0,
       {},
       "sweep and clean every topic on timers and serve /metrics, /healthz, "
       "/readyz (default)",
       [](Call& c) { return App(c.argv, std::move(c.inv)).Run(); }},
      {{"sweep"},
       "",
       0,
       0,
       {{"once", "",
         "one pass over every topic (the headless sweep, then the log "
         "cleaner), then exit; 'run' sweeps on timers",
         true}},
       "one headless sweep and one log cleaner pass of every topic; exit 1 "
       "if any failed",
       [](Call& c) { return SweepOnce(c.inv.settings); }},
      {{"stats"},
       "",
       0,
       0,
       {kJson},
       "headless rows, log size, tombstones, cleaner lag and run state per "
       "topic",
       [](Call& c) { return Stats(c.inv.settings, c.Has("json")); }},
      {{"schema", "install"},
       "",
       0,
       0,
       {{"roles", "",
         "also create or refresh the least-privilege roles <prefix>_owner, "
         "_app, _janitor, _monitor (superuser)"},
        {"role-prefix", "P",
         "role name prefix, with --roles (default: the schema name)"}},
       "create the schema (idempotent)",
       RunSchemaInstall},
      {{"topic", "register"},
       "NAME...",
       1,
       kAnyCount,
       {{"headless-ttl", "D", "TTL of headless rows (default 1h)"},
        {"retention", "D|keep",
         "how long messages that are not their key's head are kept, or "
         "'keep' (default 7d)"},
        {"tombstone-retention", "D|keep",
         "how long a tombstone head is kept, or 'keep' (default 1d)"},
        {"partitions", "N",
         "partitions consumers split a new topic in, 1..1024 (default 1); "
         "fixed once the topic exists"}},
       "register topics, or change their settings",
       RunTopicRegister},
      {{"topic", "list"},
       "",
       0,
       0,
       {kJson},
       "every topic and its settings",
       [](Call& c) { return TopicList(c.inv.settings, c.Has("json")); }},
      {{"topic", "destroy"},
       "NAME",
       1,
       1,
       {{"yes", "",
         "confirm dropping the topic and all its messages; it cannot be "
         "undone",
         true}},
       "drop the topic, its messages and its heads (the schema owner's role)",
       [](Call& c) { return TopicDestroy(c.inv.settings, c.args[0]); }},
      {{"topic", "tail"},
       "TOPIC",
       1,
       1,
       {{"from-start", "", "the whole log first, then what commits"},
        {"heads-only", "", "only messages that are their key's head"},
        kJson},
       "print messages as they commit until SIGINT/SIGTERM; keeps no "
       "position",
       [](Call& c) {
         return TopicTail(c.inv.settings, c.args[0], c.Has("from-start"),
                          c.Has("heads-only"), c.Has("json"));
       }},
      {{"consumer", "list"},
       "",
       0,
       0,
       {kJson},
       "lag, last poll and activity per topic and consumer",
       [](Call& c) { return ConsumerList(c.inv.settings, c.Has("json")); }},
      {{"consumer", "reset"},
       "TOPIC NAME --to-start|--to-end",
       2,
       2,
       {{"to-start", "", "deliver every message again"},
        {"to-end", "", "count what is committed now as consumed"}},
       "move the consumer's positions (exactly one of the two flags)",
       RunConsumerReset},
      {{"consumer", "drop"},
       "TOPIC NAME",
       2,
       2,
       {},
       "delete the consumer's positions (the schema owner's role)",
       [](Call& c) {
         return ConsumerDrop(c.inv.settings, c.args[0], c.args[1]);
       }},
  };
  return table;
}

std::vector<Flag> CommandFlags() {
  std::vector<Flag> out;
  for (const Command& c : CommandTable()) {
    for (const Flag& f : c.flags) {
      const bool seen = std::any_of(out.begin(), out.end(), [&](const Flag& o) {
        return o.name == f.name;
      });
      if (seen) continue;
      Flag shown = f;
      shown.help = Join(CommandsTaking(f.name), ", ") + ": " + f.help;
      out.push_back(shown);
    }
  }
  return out;
}

std::string CommandsHelp() {
  std::vector<std::string> usages;
  size_t width = 0;
  for (const Command& c : CommandTable()) {
    usages.push_back(c.Usage());
    width = std::max(width, usages.back().size());
  }
  width = std::min<size_t>(width, 34);
  std::ostringstream out;
  for (size_t i = 0; i < usages.size(); ++i) {
    out << "  " << usages[i]
        << std::string(usages[i].size() < width ? width - usages[i].size() : 0,
                       ' ')
        << "  " << CommandTable()[i].help << "\n";
  }
  return out.str();
}

int Dispatch(const std::vector<std::string>& argv, Invocation& inv) {
  const std::vector<std::string> words =
      inv.command.empty() ? std::vector<std::string>{"run"} : inv.command;
  const Command* command = Find(words);
  if (command == nullptr) {
    // The words are quoted only when each looks like a command word: a
    // conninfo given without --db lands here, or a password typed where a
    // command goes ("hunter2"), and neither may reach stderr.
    const bool quotable =
        std::all_of(words.begin(), words.end(), LooksLikeCommandWord);
    throw ConfigError(
        quotable ? "unknown command '" + Join(words, " ") + "' (" +
                       DidYouMeanCommand(words) + "see --help)"
                 : "unknown command (not shown: a word of it is not a "
                   "command word, a-z and '-' only; a conninfo goes in --db "
                   "or the config file; see --help)");
  }
  Call call{argv, inv, {words.begin() + command->words.size(), words.end()}};
  CheckUse(*command, call);
  return command->run(call);
}

}  // namespace compactiond::cli
