// Classifies exceptions from libcompaction for the daemon's retry logic.
// Pure functions; thread-safe.
#pragma once

#include <exception>
#include <string>

namespace compactiond {

// True when the error means the database (or the way to it) is gone, so the
// client should be dropped and reconnected: ConnectionLost,
// CommitOutcomeUnknown, SQLSTATE class 08 and the 57P0x shutdown states.
bool IsConnectionError(const std::exception_ptr& error);

// True for a cancelled statement (StatementCancelled), e.g. ours at shutdown.
bool IsCancelled(const std::exception_ptr& error);

// "ConnectionLost: <message>" for logs. Library messages carry no passwords.
std::string Describe(const std::exception_ptr& error);

}  // namespace compactiond
