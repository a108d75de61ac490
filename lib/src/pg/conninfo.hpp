// Conninfo and startup options as pure functions: what every connection the
// library opens is given (pins, defaults) and the per-transaction SQL that
// stands in for the startup options behind a transaction pooler. Only
// ParseConninfo calls libpq (to parse); nothing here connects, and nothing
// reads the process environment but Environment::OfProcess.
#pragma once

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

// The startup options every connection we open gets: search_path pinned,
// and READ COMMITTED for statements outside a transaction block (an
// autocommit Produce is one implicit transaction, ExecCommitted), whatever
// default a role or database sets. Behind a transaction pooler they become
// per-transaction settings (LocalSettingsSql), where the isolation one
// changes nothing: the block there starts with its own isolation level.
inline constexpr const char* kPinnedOptions =
    "-c search_path=pg_catalog,pg_temp "
    "-c default_transaction_isolation=read\\ committed";

// The client_encoding of every library connection but the NOTIFY
// listener's (ForConnection sets it, LocalSettingsSql per transaction).
inline constexpr const char* kClientEncoding = "UTF8";

// What libpq would take from the process environment that ForConnection
// decides on: PGOPTIONS (used when the conninfo sets no options) and
// whether PGCONNECT_TIMEOUT is set (then the default connect_timeout
// stays away).
struct Environment {
  std::string pgoptions;
  bool connect_timeout = false;
  static Environment OfProcess();
};

// `options` (a libpq startup options string) with the pins appended, so
// they win over any search_path or isolation the caller set there.
std::string PinnedOptions(std::string options);

// `params` as every connection the library opens gets them: search_path
// and isolation pinned (kPinnedOptions, appended to their or PGOPTIONS'
// options), and connect_timeout 10 s, TCP keepalives and tcp_user_timeout
// 30 s unless they set them.
ConnParams ForConnection(ConnParams params,
                         const Environment& env = Environment::OfProcess());

// The `-c name=value` and `--name=value` settings of a libpq startup
// `options` string, in order. Throws InvalidArgument (without quoting the
// string) on anything else, e.g. another postgres switch.
std::vector<std::pair<std::string, std::string>> OptionSettings(
    const std::string& options, const char* operation);

// One statement that applies the startup settings ForConnection(params)
// would send (the search_path pin, the caller's -c settings) with
// set_config(name, value, is_local => true): the same settings, for the
// current transaction only. Throws InvalidArgument like OptionSettings.
std::string LocalSettingsSql(const ConnParams& params, const char* operation,
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
