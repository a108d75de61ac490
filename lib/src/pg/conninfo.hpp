// Conninfo and startup options as pure functions: what every connection the
// library opens is given (pins, defaults) and the per-transaction SQL that
// stands in for the startup options behind a transaction pooler. Only
// ParseConninfo calls libpq (to parse); nothing here connects, and nothing
// reads the process environment but Environment::OfProcess.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "compaction/conninfo.hpp"

namespace compaction::pg {

// libpq keyword -> value.
using ConnParams = compaction::ConnParams;

// The keywords a conninfo (keyword/value string or URI) sets; throws
// InvalidArgument, without quoting it, when it does not parse.
ConnParams ParseConninfo(const std::string& conninfo, const char* operation);

// Server settings name -> value (ClientOptions::session_settings).
using SessionSettings = std::map<std::string, std::string>;
using SettingList = std::vector<std::pair<std::string, std::string>>;

// The settings every connection we open gets after the caller's: search_path
// pinned, and READ COMMITTED for statements outside a transaction block (an
// autocommit Produce is one implicit transaction, ExecCommitted), whatever
// default a role or database sets. Behind a transaction pooler they are set
// per transaction (LocalSettingsSql), where the isolation one changes
// nothing: the block there starts with its own isolation level.
inline constexpr std::pair<const char*, const char*> kPinnedSettings[] = {
    {"search_path", "pg_catalog,pg_temp"},
    {"default_transaction_isolation", "read committed"},
};

// The client_encoding of every library connection but the NOTIFY
// listener's (ForConnection sets it, LocalSettingsSql per transaction).
inline constexpr const char* kClientEncoding = "UTF8";

// Whether the library sets `name` itself (kPinnedSettings, client_encoding;
// any letter case), so a session setting of that name would not hold.
bool IsPinnedSetting(const std::string& name);

// Whether `name` can be a setting name: letters, digits, '_' and '.'
// (custom settings), as postgres takes it in `-c name=value`.
bool IsSettingName(const std::string& name);

// What libpq would take from the process environment that ForConnection
// decides on: PGOPTIONS (used when the conninfo sets no options) and
// whether PGCONNECT_TIMEOUT is set (then the default connect_timeout
// stays away).
struct Environment {
  std::string pgoptions;
  bool connect_timeout = false;
  static Environment OfProcess();
};

// The caller's own startup options: the conninfo's `options`, or
// PGOPTIONS when it sets none (or an empty one).
std::string CallerOptions(const ConnParams& params, const Environment& env);

// `settings` as `-c name=value` words of a startup options string, white
// space and backslashes in a value escaped with a backslash, as the server
// splits the string. Names must pass IsSettingName and values hold no NUL
// (CheckClientOptions).
std::string RenderSettings(const SettingList& settings);

// `params` as every connection the library opens gets them: the startup
// options are the caller's (CallerOptions), then `settings`, then the pins
// (later ones win, so `settings` override the caller's options of the same
// name); connect_timeout 10 s, TCP keepalives and tcp_user_timeout 30 s
// unless they set them.
ConnParams ForConnection(ConnParams params, const SessionSettings& settings,
                         const Environment& env = Environment::OfProcess());

// The `-c name=value` and `--name=value` settings of a libpq startup
// `options` string, in order. Throws InvalidArgument (without quoting the
// string) on anything else, e.g. another postgres switch.
SettingList OptionSettings(const std::string& options, const char* operation);

// One statement that applies what ForConnection(params, settings) would send
// as startup options (the caller's -c settings, then `settings`, then the
// pins) with set_config(name, value, is_local => true): the same settings,
// for the current transaction only. A caller's setting that `settings` or a
// pin sets again is left out. Throws InvalidArgument like OptionSettings.
std::string LocalSettingsSql(const ConnParams& params,
                             const SessionSettings& settings,
                             const char* operation,
                             const Environment& env = Environment::OfProcess());

// How a connection gets the settings of its startup `options`.
enum class StartupOptions {
  kSend,            // in the startup packet, for the whole session
  kPerTransaction,  // not at all: the caller runs LocalSettingsSql in each
                    // transaction (for transaction poolers)
};

// The parameter arrays PQconnectdbParams and PQconnectStartParams take;
// valid while `params` lives.
struct ParamArrays {
  explicit ParamArrays(const ConnParams& params);
  std::vector<const char*> keywords;
  std::vector<const char*> values;
};

}  // namespace compaction::pg
