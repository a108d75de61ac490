// Classifies exceptions from libcompaction for the daemon's retry logic.
// Pure functions; thread-safe.
#pragma once

#include <exception>
#include <optional>
#include <string>

#include "daemon/config.hpp"

namespace compactiond {

// True when the error means the database (or the way to it) is gone, so the
// client should be dropped and reconnected: ConnectionLost,
// CommitOutcomeUnknown, SQLSTATE class 08 and the 57P0x shutdown states.
bool IsConnectionError(const std::exception_ptr& error);

// The role the server refused at connect (AuthenticationFailed: a wrong
// password, pg_hba.conf); nullopt for any other error. Retrying at the
// reconnect rate cannot help, so callers back off further.
std::optional<std::string> RefusedRole(const std::exception_ptr& error);

// Retry delays after an authentication failure: at least kAuthBackoffMin,
// doubling up to kAuthBackoffMax (or reconnect-max if that is longer), so
// a wrong password costs one log line a minute, not two a second.
inline constexpr Millis kAuthBackoffMin{1000};
inline constexpr Millis kAuthBackoffMax{60000};

// True for a cancelled statement (StatementCancelled), e.g. ours at shutdown.
bool IsCancelled(const std::exception_ptr& error);

// True for a failure the next attempt may not meet: a cancelled statement
// (statement_timeout), a lock wait that timed out, a serialization failure
// or deadlock.
bool IsTransient(const std::exception_ptr& error);

// "ConnectionLost: <message>" for logs. Library messages carry no passwords.
std::string Describe(const std::exception_ptr& error);

}  // namespace compactiond
