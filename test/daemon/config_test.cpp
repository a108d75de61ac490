// Unit tests of compactiond's configuration layer: no database, no binary.
#include "daemon/config.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cctype>
#include <compaction/stats.hpp>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "daemon/conninfo.hpp"
#include "daemon/duration.hpp"
#include "daemon/scheduler.hpp"
#include "daemon/suggest.hpp"
#include "test/daemon/test_support.hpp"

namespace compactiond {
namespace {

using std::chrono::milliseconds;

using test::ErrorOf;
using test::ScopedEnv;
using test::WriteFile;

// A value other than the default for every setting, as the text its parser
// reads and its formatter writes. A new setting needs one here; the
// round-trip test names a setting that has none.
const std::map<std::string, std::string>& OtherValues() {
  static const std::map<std::string, std::string> values = {
      {"db", "host=elsewhere dbname=x"},
      {"schema", "other_schema"},
      {"listen", "[::1]:9999"},
      {"pool-size", "7"},
      {"application-name", "other-app"},
      {"min-interval", "2s"},
      {"max-interval", "10m"},
      {"jitter", "0.25"},
      {"batch-size", "123"},
      {"max-batches", "45"},
      {"statement-timeout", "7s"},
      {"claim-ttl", "2m"},
      {"batch-pause", "0s"},
      {"duty-cycle", "0.75"},
      {"owner", "replica-b"},
      {"cleaner-min-interval", "3s"},
      {"cleaner-max-interval", "15m"},
      {"cleaner-batch-size", "321"},
      {"cleaner-batch-pause", "5ms"},
      {"cleaner-duty-cycle", "0.25"},
      {"stats-interval", "20s"},
      {"stats-timeout", "3s"},
      {"stats-exact-count-limit", "5000000000"},
      {"topic-refresh-interval", "1m"},
      {"prepared-statements", "false"},
      {"listen-notify", "false"},
      {"reconnect-min", "250ms"},
      {"reconnect-max", "20s"},
      {"shutdown-timeout", "9s"},
      {"log-level", "debug"},
      {"metrics-per-topic", "detail"},
  };
  return values;
}

std::string EnvNameOf(const std::string& key) {
  std::string out = "COMPACTIOND_";
  for (char c : key) {
    out.push_back(c == '-' ? '_' : static_cast<char>(std::toupper(c)));
  }
  return out;
}

// The keys of --print-config output, in order.
std::vector<std::string> RenderedKeys(const std::string& rendered) {
  std::vector<std::string> keys;
  std::istringstream in(rendered);
  for (std::string line; std::getline(in, line);) {
    keys.push_back(line.substr(0, line.find(" = ")));
  }
  return keys;
}

TEST_CASE("every setting round-trips: default -> format -> parse") {
  const Settings defaults;
  for (const SettingSpec& spec : SettingTable()) {
    INFO(spec.name);
    REQUIRE(OtherValues().count(spec.name) == 1);
    const std::string& text = OtherValues().at(spec.name);
    Settings other;
    spec.parse(other, text);
    CHECK_FALSE(spec.same(other, defaults));  // the parser sets this member
    CHECK(spec.format(other) == text);
    Settings back = other;
    spec.parse(back, spec.format(defaults));
    CHECK(spec.same(back, defaults));
  }
  CHECK(OtherValues().size() == SettingTable().size());
}

TEST_CASE("every setting is read from a flag, the environment and a file") {
  for (const SettingSpec& spec : SettingTable()) {
    INFO(spec.name);
    const std::string& text = OtherValues().at(spec.name);
    Settings want;
    spec.parse(want, text);

    Invocation flag = ParseInvocation({"--" + spec.name, text});
    CHECK(spec.same(flag.settings, want));
    CHECK(flag.sources.at(spec.name) == Source::kFlag);
    {
      const std::string name = EnvNameOf(spec.name);  // outlives `env`
      ScopedEnv env(name.c_str(), text.c_str());
      Invocation inv = ParseInvocation({});
      CHECK(spec.same(inv.settings, want));
      CHECK(inv.sources.at(spec.name) == Source::kEnvironment);
    }
    std::string file = WriteFile(spec.name + " = " + text + "\n");
    Invocation from_file = ParseInvocation({"--config", file});
    std::remove(file.c_str());
    CHECK(spec.same(from_file.settings, want));
    CHECK(from_file.sources.at(spec.name) == Source::kFile);
  }
}

TEST_CASE("print-config lists every setting and reads back the same") {
  std::vector<std::string> table_keys;
  for (const SettingSpec& spec : SettingTable()) {
    table_keys.push_back(spec.name);
  }
  CHECK(RenderedKeys(RenderConfig(ParseInvocation({}))) == table_keys);

  std::string config;
  for (const auto& [key, text] : OtherValues()) {
    config += key + " = " + text + "\n";
  }
  std::string file = WriteFile(config);
  Invocation first = ParseInvocation({"--config", file});
  std::remove(file.c_str());
  const std::string rendered = RenderConfig(first);
  CHECK(RenderedKeys(rendered) == table_keys);
  // The output is a config file ('#' starts a comment) giving the same
  // settings; only a secret key's value is rewritten (masked and quoted).
  file = WriteFile(rendered);
  Invocation second = ParseInvocation({"--config", file});
  std::remove(file.c_str());
  for (const SettingSpec& spec : SettingTable()) {
    INFO(spec.name);
    if (spec.secret) continue;
    CHECK(spec.same(second.settings, first.settings));
    CHECK_THAT(rendered,
               Catch::Contains(spec.name + " = " + OtherValues().at(spec.name) +
                               "  # file\n"));
  }
}

TEST_CASE("a reload keeps exactly the restart-only settings") {
  std::vector<std::string> restart_only;
  std::vector<std::string> args;
  for (const SettingSpec& spec : SettingTable()) {
    if (spec.restart_only) restart_only.push_back(spec.name);
    args.push_back("--" + spec.name);
    args.push_back(OtherValues().at(spec.name));
  }
  // The keys App::Reload has always kept (they shape connections, sockets,
  // the metrics registry).
  CHECK(restart_only ==
        std::vector<std::string>{"db", "schema", "listen", "pool-size",
                                 "application-name", "stats-timeout",
                                 "prepared-statements", "listen-notify",
                                 "metrics-per-topic"});
  const Settings running;
  const Settings fresh = ParseInvocation(args).settings;
  ReloadPlan plan = PlanReload(running, fresh);
  CHECK(plan.ignored == restart_only);
  for (const SettingSpec& spec : SettingTable()) {
    INFO(spec.name);
    CHECK(spec.same(plan.settings, spec.restart_only ? running : fresh));
  }
  CHECK(PlanReload(running, running).ignored.empty());
  CHECK(PlanReload(fresh, fresh).ignored.empty());
}

TEST_CASE("precedence is flag > environment > file > default") {
  std::string file = WriteFile(
      "batch-size = 11\nmax-batches = 12\n"
      "pool-size = 3\n");
  ScopedEnv e1("COMPACTIOND_BATCH_SIZE", "21");
  ScopedEnv e2("COMPACTIOND_MAX_BATCHES", "22");
  Invocation inv =
      ParseInvocation({"--config", file, "--batch-size", "31", "stats"});
  CHECK(inv.settings.batch_size == 31);
  CHECK(inv.sources.at("batch-size") == Source::kFlag);
  CHECK(inv.settings.max_batches == 22);
  CHECK(inv.sources.at("max-batches") == Source::kEnvironment);
  CHECK(inv.settings.pool_size == 3);
  CHECK(inv.sources.at("pool-size") == Source::kFile);
  CHECK(inv.settings.jitter == Settings{}.jitter);
  CHECK(inv.sources.at("jitter") == Source::kDefault);
  CHECK(inv.command == std::vector<std::string>{"stats"});
  std::remove(file.c_str());
}

TEST_CASE("invalid values name their key") {
  CHECK_THAT(ErrorOf({"--batch-size", "0"}), Catch::Contains("'batch-size'"));
  CHECK_THAT(ErrorOf({"--stats-interval", "soon"}),
             Catch::Contains("'stats-interval'"));
  CHECK_THAT(ErrorOf({"--jitter", "2"}), Catch::Contains("'jitter'"));
  CHECK_THAT(ErrorOf({"--listen", "9473"}), Catch::Contains("'listen'"));
  ScopedEnv env("COMPACTIOND_LOG_LEVEL", "chatty");
  CHECK_THAT(ErrorOf({}), Catch::Contains("'log-level'"));
}

TEST_CASE("batch-pause: default, every source, bounds, and the sweep options") {
  Invocation def = ParseInvocation({});
  CHECK(def.settings.batch_pause == milliseconds(10));
  CHECK(def.sources.at("batch-pause") == Source::kDefault);
  CHECK(RenderConfig(def).find("batch-pause = 10ms  # default") !=
        std::string::npos);

  Invocation flag = ParseInvocation({"--batch-pause", "250ms"});
  CHECK(flag.settings.batch_pause == milliseconds(250));
  CHECK(flag.sources.at("batch-pause") == Source::kFlag);
  CHECK(RenderConfig(flag).find("batch-pause = 250ms  # flag") !=
        std::string::npos);
  // 0 turns pacing off.
  CHECK(ParseInvocation({"--batch-pause", "0"}).settings.batch_pause ==
        milliseconds(0));
  CHECK(ParseInvocation({"--batch-pause", "1m", "--claim-ttl", "2m"})
            .settings.batch_pause == milliseconds(60'000));
  {
    ScopedEnv env("COMPACTIOND_BATCH_PAUSE", "2s");
    Invocation inv = ParseInvocation({});
    CHECK(inv.settings.batch_pause == milliseconds(2000));
    CHECK(inv.sources.at("batch-pause") == Source::kEnvironment);
  }
  std::string file = WriteFile("batch-pause = 1500ms\n");
  Invocation from_file = ParseInvocation({"--config", file});
  CHECK(from_file.settings.batch_pause == milliseconds(1500));
  CHECK(from_file.sources.at("batch-pause") == Source::kFile);
  std::remove(file.c_str());

  // The library gets it, and its claim-ttl stays longer.
  ScheduleSettings schedule = ScheduleSettings::From(flag.settings);
  CHECK(schedule.sweep.batch_pause == milliseconds(250));
  CHECK(schedule.sweep.claim_ttl > schedule.sweep.batch_pause);

  for (const char* bad : {"soon", "-5ms", "1.5s", "2m", ""}) {
    INFO(bad);
    CHECK_THAT(ErrorOf({"--batch-pause", bad}),
               Catch::Contains("'batch-pause'"));
  }
  CHECK_THAT(ErrorOf({"--batch-pause", "30s", "--claim-ttl", "30s",
                      "--statement-timeout", "5s"}),
             Catch::Contains("'batch-pause'") && Catch::Contains("claim-ttl"));
  ScopedEnv env("COMPACTIOND_BATCH_PAUSE", "forever");
  CHECK_THAT(ErrorOf({}), Catch::Contains("'batch-pause'"));
}

TEST_CASE("duty-cycle: default, sources, bounds, and the sweep options") {
  Invocation def = ParseInvocation({});
  CHECK(def.settings.duty_cycle == 0.5);
  CHECK(RenderConfig(def).find("duty-cycle = 0.5  # default") !=
        std::string::npos);
  Invocation flag = ParseInvocation({"--duty-cycle", "0.25"});
  CHECK(flag.settings.duty_cycle == 0.25);
  CHECK(flag.sources.at("duty-cycle") == Source::kFlag);
  CHECK(RenderConfig(flag).find("duty-cycle = 0.25  # flag") !=
        std::string::npos);
  CHECK(ParseInvocation({"--duty-cycle", "1"}).settings.duty_cycle == 1.0);
  {
    ScopedEnv env("COMPACTIOND_DUTY_CYCLE", "0.1");
    CHECK(ParseInvocation({}).settings.duty_cycle == 0.1);
  }
  std::string file = WriteFile("duty-cycle = 0.75\n");
  CHECK(ParseInvocation({"--config", file}).settings.duty_cycle == 0.75);
  std::remove(file.c_str());
  CHECK(ScheduleSettings::From(flag.settings).sweep.duty_cycle == 0.25);

  for (const char* bad : {"0", "-0.5", "1.5", "half", "0.5x", "nan", ""}) {
    INFO(bad);
    CHECK_THAT(ErrorOf({"--duty-cycle", bad}), Catch::Contains("'duty-cycle'"));
  }
}

TEST_CASE("stats-exact-count-limit: default, sources, bounds") {
  Invocation def = ParseInvocation({});
  CHECK(def.settings.stats_exact_count_limit == 10000);
  CHECK(RenderConfig(def).find("stats-exact-count-limit = 10000  # default") !=
        std::string::npos);
  // Beyond int: the limit is a 64-bit count, up to "count everything".
  CHECK(ParseInvocation({"--stats-exact-count-limit", "9223372036854775806"})
            .settings.stats_exact_count_limit ==
        compaction::StatsOptions::kCountAll);
  {
    ScopedEnv env("COMPACTIOND_STATS_EXACT_COUNT_LIMIT", "5000000000");
    Invocation inv = ParseInvocation({});
    CHECK(inv.settings.stats_exact_count_limit == 5'000'000'000);
    CHECK(inv.sources.at("stats-exact-count-limit") == Source::kEnvironment);
  }
  std::string file = WriteFile("stats-exact-count-limit = 250\n");
  Invocation from_file = ParseInvocation({"--config", file});
  std::remove(file.c_str());
  CHECK(from_file.settings.stats_exact_count_limit == 250);

  for (const char* bad : {"0", "-1", "9223372036854775807",
                          "99999999999999999999", "1e4", "ten", ""}) {
    INFO(bad);
    CHECK_THAT(ErrorOf({"--stats-exact-count-limit", bad}),
               Catch::Contains("'stats-exact-count-limit'"));
  }
}

TEST_CASE("a config-file line that does not parse is reported by number") {
  std::string file = WriteFile(
      "# comment\n"
      "db = password=hunter2 host=x\n"
      "\n"
      "db password=hunter2 sslpassword=hunter2\n"
      "batch-size = 10\n");
  std::string error = ErrorOf({"--config", file, "--check-config"});
  std::remove(file.c_str());
  CHECK_THAT(error, Catch::Contains(file) && Catch::Contains("line 4"));
  CHECK(error.find("hunter2") == std::string::npos);

  // A key that is not one: named when it looks like a key, never otherwise.
  file = WriteFile("batch-size = 10\nhost=x password=hunter2\n");
  error = ErrorOf({"--config", file});
  std::remove(file.c_str());
  CHECK_THAT(error, Catch::Contains("line 2") &&
                        Catch::Contains("unknown key 'host'"));
  CHECK(error.find("hunter2") == std::string::npos);
  file = WriteFile("postgresql://u:hunter2@h/db?sslmode=require\n");
  error = ErrorOf({"--config", file});
  std::remove(file.c_str());
  CHECK_THAT(error,
             Catch::Contains("line 1") && Catch::Contains("unknown key"));
  CHECK(error.find("hunter2") == std::string::npos);

  // Boost.Program_options' rules still hold: '#' starts a comment anywhere,
  // whitespace is trimmed, the last value of a key wins, sections prefix keys.
  file = WriteFile("  batch-size=7 # seven\r\nbatch-size = 8\n\n# x = y\n");
  CHECK(ParseInvocation({"--config", file}).settings.batch_size == 8);
  std::remove(file.c_str());
  file = WriteFile("[server]\nbatch-size = 8\n");
  CHECK_THAT(ErrorOf({"--config", file}),
             Catch::Contains("line 2") &&
                 Catch::Contains("unknown key 'server.batch-size'"));
  std::remove(file.c_str());
}

TEST_CASE("a secret in a config file readable by others is flagged") {
  std::string file = WriteFile("db = host=h sslpassword=hunter2\n");
  ::chmod(file.c_str(), 0644);
  CHECK(ParseInvocation({"--config", file}).exposed_secret_mode == 0644u);
  ::chmod(file.c_str(), 0640);
  CHECK(ParseInvocation({"--config", file}).exposed_secret_mode == 0640u);
  ::chmod(file.c_str(), 0600);
  CHECK_FALSE(ParseInvocation({"--config", file}).exposed_secret_mode);
  std::remove(file.c_str());

  file = WriteFile("db = postgresql://u:pw@h/db\n");
  ::chmod(file.c_str(), 0604);
  CHECK(ParseInvocation({"--config", file}).exposed_secret_mode == 0604u);
  std::remove(file.c_str());
  // No secret, no warning, whatever the mode.
  file = WriteFile("db = host=h sslmode=verify-full\n");
  ::chmod(file.c_str(), 0644);
  CHECK_FALSE(ParseInvocation({"--config", file}).exposed_secret_mode);
  std::remove(file.c_str());
}

TEST_CASE("boolean settings take true or false only") {
  for (const char* key : {"prepared-statements", "listen-notify"}) {
    for (const char* bad : {"yes", "1", "TRUE", ""}) {
      INFO(key << " = " << bad);
      CHECK_THAT(ErrorOf({"--" + std::string(key), bad}),
                 Catch::Contains("expected true or false"));
    }
  }
}

TEST_CASE("every duration setting has an upper bound") {
  struct Case {
    const char* key;
    const char* at_bound;
    const char* above;
    const char* bound_text;
    std::vector<std::string> companions;  // keys a related check needs
  };
  const std::vector<Case> cases = {
      {"claim-ttl", "36500d", "36500d1ms", "36500d", {}},
      {"min-interval", "365d", "365d1ms", "365d", {"--max-interval", "365d"}},
      {"max-interval", "365d", "366d", "365d", {}},
      {"stats-interval", "365d", "1000000000d", "365d", {}},
      {"topic-refresh-interval", "365d", "3000000d", "365d", {}},
      {"reconnect-min", "365d", "365d1s", "365d", {"--reconnect-max", "365d"}},
      {"reconnect-max", "365d", "400d", "365d", {}},
      {"shutdown-timeout", "365d", "366d", "365d", {}},
      {"statement-timeout",
       "2147483647ms",
       "2147483648ms",
       "2147483647ms",
       {"--claim-ttl", "30d"}},
      {"stats-timeout", "2147483647ms", "25d", "2147483647ms", {}},
      {"batch-pause", "1m", "61s", "1m", {"--claim-ttl", "2m"}},
  };
  for (const Case& c : cases) {
    INFO(c.key);
    std::vector<std::string> ok = {std::string("--") + c.key, c.at_bound};
    ok.insert(ok.end(), c.companions.begin(), c.companions.end());
    CHECK(ErrorOf(ok) == "");
    std::vector<std::string> bad = {std::string("--") + c.key, c.above};
    bad.insert(bad.end(), c.companions.begin(), c.companions.end());
    CHECK_THAT(ErrorOf(bad), Catch::Contains("'" + std::string(c.key) + "'") &&
                                 Catch::Contains(c.bound_text));
  }
}

TEST_CASE("a schema name with braces is refused") {
  for (const char* schema : {"{id}", "a{b", "x}", "{schema}"}) {
    INFO(schema);
    CHECK_THAT(ErrorOf({"--schema", schema}), Catch::Contains("'schema'"));
  }
  CHECK(ParseInvocation({"--schema", "Compaction-1$x"}).settings.schema ==
        "Compaction-1$x");
}

TEST_CASE("listen addresses") {
  CHECK(ParseListen("listen", "127.0.0.1:9473") ==
        std::pair<std::string, unsigned short>{"127.0.0.1", 9473});
  CHECK(ParseListen("listen", "[::1]:0") ==
        std::pair<std::string, unsigned short>{"::1", 0});
  CHECK_THROWS_AS(ParseListen("listen", "[::1]"), ConfigError);
  CHECK_THROWS_AS(ParseListen("listen", "host:http"), ConfigError);
  // An empty host would bind every interface (the resolver's wildcard).
  CHECK_THROWS_WITH(ParseListen("listen", "[]:9473"),
                    Catch::Contains("the host is empty"));
  CHECK_THROWS_AS(ParseListen("listen", ":9473"), ConfigError);
  CHECK(ParseListen("listen", "[::]:9473") ==
        std::pair<std::string, unsigned short>{"::", 9473});
}

TEST_CASE("names sent as text are printable UTF-8 of bounded length") {
  // PostgreSQL refuses text that is not UTF-8 (22021): at start-up, not at
  // every sweep's claim.
  const std::string not_utf8 = "\xff\xfe", overlong = "a\xc0\xaf";
  for (const char* key : {"--schema", "--application-name", "--owner"}) {
    for (const std::string& bad : {not_utf8, overlong, std::string("a\x1b[2Jb"),
                                   std::string("\xc2\x9b")}) {
      INFO(key << " " << bad.size());
      const std::string error = ErrorOf({key, bad});
      CHECK_THAT(error, Catch::Contains("without control characters"));
      CHECK(error.find(bad) == std::string::npos);  // not quoted
    }
  }
  CHECK_THAT(ErrorOf({"--owner", std::string(201, 'o')}),
             Catch::Contains("at most 200 bytes"));
  CHECK(ParseInvocation({"--owner", std::string(200, 'o')}).settings.owner ==
        std::string(200, 'o'));
  CHECK(ParseInvocation({"--owner", "r\xc3\xa9plica-1"}).settings.owner ==
        "r\xc3\xa9plica-1");
  CHECK(ParseInvocation({"--owner", ""}).settings.owner.empty());
  CHECK(ParseInvocation({"--schema", "sch\xc3\xa9ma"}).settings.schema ==
        "sch\xc3\xa9ma");
}

TEST_CASE(
    "cleaner settings: bounds, relations and the cleaner's sweep options") {
  const Invocation def = ParseInvocation({});
  CHECK(def.settings.cleaner_min_interval == std::chrono::seconds(1));
  CHECK(def.settings.cleaner_max_interval == std::chrono::minutes(5));
  CHECK_THAT(ErrorOf({"--cleaner-min-interval", "10s", "--cleaner-max-interval",
                      "5s"}),
             Catch::Contains("'cleaner-max-interval'"));
  CHECK_THAT(ErrorOf({"--cleaner-batch-pause", "1m", "--claim-ttl", "30s"}),
             Catch::Contains("'cleaner-batch-pause'"));
  CHECK_THAT(ErrorOf({"--cleaner-duty-cycle", "0"}),
             Catch::Contains("'cleaner-duty-cycle'"));
  CHECK_THAT(ErrorOf({"--cleaner-batch-size", "0"}),
             Catch::Contains("'cleaner-batch-size'"));
  const Invocation inv = ParseInvocation(
      {"--cleaner-batch-size", "50", "--cleaner-duty-cycle", "0.25",
       "--cleaner-batch-pause", "0", "--batch-size", "70"});
  const compactiond::ScheduleSettings s =
      compactiond::ScheduleSettings::From(inv.settings);
  CHECK(s.cleaner.batch_size == 50);
  CHECK(s.cleaner.duty_cycle == 0.25);
  CHECK(s.cleaner.batch_pause.count() == 0);
  CHECK(s.sweep.batch_size == 70);
  CHECK(s.cleaner.max_batches == s.sweep.max_batches);
}

TEST_CASE("topic register takes a TTL up to the bound") {
  CHECK(ParseTtl("headless-ttl", "36500d") == kMaxTtl);
  CHECK_THROWS_WITH(
      ParseTtl("headless-ttl", "1000000000d"),
      Catch::Contains("'headless-ttl'") && Catch::Contains("36500d"));
}

TEST_CASE("topic register takes retentions as durations or keep") {
  CHECK(ParseRetention("retention", "0") == std::chrono::milliseconds(0));
  CHECK(ParseRetention("tombstone-retention", "keep") ==
        compaction::kKeepForever);
  CHECK(ParseRetention("retention", "36500d") == compaction::kMaxTtl);
  for (const char* bad : {"-1s", "forever", "36501d", ""}) {
    INFO(bad);
    CHECK_THROWS_WITH(ParseRetention("retention", bad),
                      Catch::Contains("'retention'"));
  }
}

TEST_CASE("edit distance and the closest setting") {
  CHECK(EditDistance("batch-size", "batch-size") == 0);
  CHECK(EditDistance("bach-size", "batch-size") == 1);
  CHECK(EditDistance("btach-size", "batch-size") == 1);  // a swap is one
  CHECK(EditDistance("", "abc") == 3);
  CHECK(EditDistance("kitten", "sitting") == 3);
  const std::vector<std::string> names = {"batch-size", "max-batches",
                                          "pool-size"};
  CHECK(Closest("bach-size", names) == "batch-size");
  CHECK(Closest("pool-sise", names) == "pool-size");
  CHECK_FALSE(Closest("colour", names).has_value());  // nothing close
  CHECK_FALSE(Closest("a-size", {"b-size", "c-size"}).has_value());  // a tie
}

TEST_CASE("an unknown COMPACTIOND_ variable is refused, with a suggestion") {
  {
    ScopedEnv env("COMPACTIOND_BACH_SIZE", "5");
    const std::string error = ErrorOf({});
    CHECK_THAT(error, Catch::Contains("unknown variable "
                                      "'COMPACTIOND_BACH_SIZE'") &&
                          Catch::Contains("did you mean "
                                          "'COMPACTIOND_BATCH_SIZE'"));
    CHECK(error.find('5') == std::string::npos);
    // --help and --version still answer.
    CHECK_NOTHROW(ParseInvocation({"--help"}));
  }
  {
    ScopedEnv env("COMPACTIOND_ZZZZZZZZ", "host=h password=hunter2");
    const std::string error = ErrorOf({});
    CHECK_THAT(error, Catch::Contains("'COMPACTIOND_ZZZZZZZZ'"));
    CHECK(error.find("did you mean") == std::string::npos);
    CHECK(error.find("hunter2") == std::string::npos);
  }
  {
    ScopedEnv env("COMPACTIOND_PORT", "tcp://10.0.0.1:9473");
    CHECK_THAT(ErrorOf({}), Catch::Contains("enableServiceLinks"));
  }
  {
    // Not a setting, but the daemon's own: the config file's path.
    std::string file = WriteFile("batch-size = 9\n");
    ScopedEnv env("COMPACTIOND_CONFIG", file.c_str());
    CHECK(ParseInvocation({}).settings.batch_size == 9);
    std::remove(file.c_str());
  }
}

TEST_CASE("an unknown key in the file or a flag gets a suggestion") {
  std::string file = WriteFile("max-batchs = 3\n");
  CHECK_THAT(ErrorOf({"--config", file}),
             Catch::Contains("unknown key 'max-batchs' (did you mean "
                             "'max-batches'?)"));
  std::remove(file.c_str());
  CHECK_THAT(ErrorOf({"--bach-size", "5"}),
             Catch::Contains("--bach-size") &&
                 Catch::Contains("did you mean '--batch-size'?"));
  CHECK(ErrorOf({"--zzzzzzzz", "5"}).find("did you mean") == std::string::npos);
}

}  // namespace
}  // namespace compactiond
