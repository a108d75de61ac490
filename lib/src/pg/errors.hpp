// What libpq reports, turned into compaction::Error (through the one
// SQLSTATE map in sqlstate.hpp), and the quoting that needs a connection.
#pragma once

#include <string>

#include "pg/result.hpp"

struct pg_conn;

namespace compaction::pg {

// Whether `result` completed: rows or a command. False for null.
bool Succeeded(const pg_result* result);

// Whether `result` is an error that says the connection is going away
// (IsConnectionGone of its SQLSTATE). False for null.
bool IsConnectionGone(const pg_result* result);

// libpq's error message of `conn` without the trailing newline.
std::string TrimmedErrorMessage(pg_conn* conn);

// `name` as a quoted identifier (e.g. "my ""schema"""), as
// PQescapeIdentifier quotes it on a UTF8 connection (every pooled one). The
// caller has checked that it is valid UTF-8 without NUL.
std::string QuoteIdentifier(const std::string& name);
// A quoted literal; InvalidArgument naming `operation` when libpq refuses
// (an invalid encoding).
std::string QuoteLiteral(pg_conn* conn, const std::string& value,
                         const char* operation);

// Throws the compaction::Error that a failed result (or a broken
// connection, when `result` is null) maps to. See sqlstate.cpp.
[[noreturn]] void ThrowError(const char* operation, pg_conn* conn,
                             const pg_result* result);
[[noreturn]] inline void ThrowError(const char* operation, pg_conn* conn,
                                    const Result& result) {
  ThrowError(operation, conn, result.get());
}

}  // namespace compaction::pg
