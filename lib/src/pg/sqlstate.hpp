// SQLSTATE to compaction::Error mapping: the one place that decides which
// error class a server or connection failure becomes, and the one place
// each SQLSTATE the library looks at is named. Pure, unit-tested.
#pragma once

#include <string>
#include <string_view>

#include "compaction/errors.hpp"

namespace compaction::pg {

inline constexpr std::string_view kUniqueViolation = "23505";
inline constexpr std::string_view kUndefinedTable = "42P01";
inline constexpr std::string_view kUndefinedColumn = "42703";
inline constexpr std::string_view kUndefinedFunction = "42883";
inline constexpr std::string_view kInvalidSchemaName = "3F000";
inline constexpr std::string_view kQueryCanceled = "57014";
inline constexpr std::string_view kLockNotAvailable = "55P03";
// untranslatable_character and character_not_in_repertoire: text the
// database encoding cannot hold (or jsonb's \u0000).
inline constexpr std::string_view kUntranslatable = "22P05";
inline constexpr std::string_view kNotInRepertoire = "22021";
// Public (compaction/errors.hpp): callers compare with it too.
using compaction::kInsufficientPrivilege;
inline constexpr std::string_view kInvalidParameterValue = "22023";
inline constexpr std::string_view kInFailedTransaction = "25P02";
// A retried transaction may succeed.
inline constexpr std::string_view kSerializationFailure = "40001";
inline constexpr std::string_view kDeadlockDetected = "40P01";
// invalid_sql_statement_name and duplicate_prepared_statement: the server
// session is not the one our statement cache describes.
inline constexpr std::string_view kInvalidStatementName = "26000";
inline constexpr std::string_view kDuplicatePreparedStatement = "42P05";
// Lost a CREATE ... IF NOT EXISTS race on a catalog's unique index.
inline constexpr std::string_view kDuplicateSchema = "42P06";
inline constexpr std::string_view kDuplicateTable = "42P07";
inline constexpr std::string_view kDuplicateObject = "42710";
// invalid_password and invalid_authorization_specification.
inline constexpr std::string_view kInvalidPassword = "28P01";
inline constexpr std::string_view kInvalidAuthorization = "28000";
// Class 08, connection exception.
inline constexpr std::string_view kConnectionExceptionClass = "08";
// The server ending the backend: admin_shutdown, crash_shutdown,
// cannot_connect_now.
inline constexpr std::string_view kAdminShutdown = "57P01";
inline constexpr std::string_view kCrashShutdown = "57P02";
inline constexpr std::string_view kCannotConnectNow = "57P03";

// Whether `sqlstate` says the connection is going away: class 08, or the
// server terminating the backend, whose socket closes next.
bool IsConnectionGone(std::string_view sqlstate);

// Throws the error for `sqlstate` ("" when the server sent none).
// `connection_broken` is true when the connection is no longer usable,
// which makes any failure a ConnectionLost.
[[noreturn]] void ThrowForSqlState(const char* operation,
                                   std::string_view sqlstate,
                                   const std::string& message,
                                   bool connection_broken);

}  // namespace compaction::pg
