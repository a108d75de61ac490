#include "pg/sqlstate.hpp"

#include "compaction/errors.hpp"

namespace compaction::pg {

[[noreturn]] void ThrowForSqlState(const char* operation,
                                   std::string_view sqlstate,
                                   const std::string& message,
                                   bool connection_broken) {
  const std::string state(sqlstate);
  // Class 08 is connection exception; 57P01..57P03 are the server shutting
  // down or refusing, after which this connection is gone too.
  if (connection_broken || state.starts_with("08") || state == "57P01" ||
      state == "57P02" || state == "57P03") {
    throw ConnectionLost(operation, "connection lost: " + message);
  }
  if (state == kLockNotAvailable) {
    throw LockTimeout(operation, state, "lock timeout: " + message);
  }
  if (state == kQueryCanceled) {
    throw StatementCancelled(operation, state, message);
  }
  // serialization_failure and deadlock_detected: the whole transaction may
  // succeed when retried.
  if (state == "40001" || state == "40P01") {
    throw RetryableError(operation, state, message);
  }
  // invalid_sql_statement_name and duplicate_prepared_statement: the
  // server connection is not the session our statement cache describes,
  // which is what a transaction pooler does.
  if (state == "26000" || state == "42P05") {
    throw DatabaseError(operation, state,
                        message +
                            " (behind a transaction pooler such as PgBouncer "
                            "in transaction mode, set "
                            "ClientOptions::prepared_statements = false)");
  }
  throw DatabaseError(operation, state, message);
}

}  // namespace compaction::pg
