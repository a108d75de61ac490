#include "pg/sqlstate.hpp"

#include "compaction/errors.hpp"

namespace compaction::pg {

bool IsConnectionGone(std::string_view sqlstate) {
  return sqlstate.starts_with(kConnectionExceptionClass) ||
         sqlstate == kAdminShutdown || sqlstate == kCrashShutdown ||
         sqlstate == kCannotConnectNow;
}

[[noreturn]] void ThrowForSqlState(const char* operation,
                                   std::string_view sqlstate,
                                   const std::string& message,
                                   bool connection_broken) {
  const std::string state(sqlstate);
  if (connection_broken || IsConnectionGone(state)) {
    throw ConnectionLost(operation, "connection lost: " + message);
  }
  if (state == kLockNotAvailable) {
    throw LockTimeout(operation, state, "lock timeout: " + message);
  }
  if (state == kQueryCanceled) {
    throw StatementCancelled(operation, state, message);
  }
  if (state == kSerializationFailure || state == kDeadlockDetected) {
    throw RetryableError(operation, state, message);
  }
  // What a transaction pooler does to a statement cache.
  if (state == kInvalidStatementName || state == kDuplicatePreparedStatement) {
    throw DatabaseError(operation, state,
                        message +
                            " (behind a transaction pooler such as PgBouncer "
                            "in transaction mode, set "
                            "ClientOptions::prepared_statements = false)");
  }
  throw DatabaseError(operation, state, message);
}

}  // namespace compaction::pg
