#include "pg/errors.hpp"

#include <libpq-fe.h>

#include <string_view>

#include "compaction/errors.hpp"
#include "pg/sqlstate.hpp"

namespace compaction::pg {

bool Succeeded(const pg_result* result) {
  if (result == nullptr) return false;
  const ExecStatusType status = PQresultStatus(result);
  return status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK;
}

bool IsConnectionGone(const pg_result* result) {
  const char* state =
      result ? PQresultErrorField(result, PG_DIAG_SQLSTATE) : nullptr;
  return state != nullptr && IsConnectionGone(std::string_view(state));
}

std::string TrimmedErrorMessage(pg_conn* conn) {
  std::string message = conn ? PQerrorMessage(conn) : "no connection";
  while (!message.empty() &&
         (message.back() == '\n' || message.back() == ' ')) {
    message.pop_back();
  }
  return message.empty() ? "unknown libpq error" : message;
}

namespace {

using Escape = char* (*)(PGconn*, const char*, size_t);

std::string Quote(Escape escape, pg_conn* conn, const std::string& text,
                  const char* operation) {
  char* quoted = escape(conn, text.c_str(), text.size());
  if (quoted == nullptr) {
    throw InvalidArgument(operation, TrimmedErrorMessage(conn));
  }
  std::string out(quoted);
  PQfreemem(quoted);
  return out;
}

}  // namespace

std::string QuoteIdentifier(const std::string& name) {
  std::string out = "\"";
  for (char c : name) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + '"';
}

std::string QuoteLiteral(pg_conn* conn, const std::string& value,
                         const char* operation) {
  return Quote(&PQescapeLiteral, conn, value, operation);
}

[[noreturn]] void ThrowError(const char* operation, pg_conn* conn,
                             const pg_result* result) {
  const char* state =
      result ? PQresultErrorField(result, PG_DIAG_SQLSTATE) : nullptr;
  // The primary message only: DETAIL lines can quote key values.
  const char* primary =
      result ? PQresultErrorField(result, PG_DIAG_MESSAGE_PRIMARY) : nullptr;
  std::string message =
      primary ? std::string(primary) : TrimmedErrorMessage(conn);
  // The server quotes the bytes it could not convert, which belong to a
  // message key or payload: name the encoding only.
  if (state != nullptr && (std::string_view(state) == kUntranslatable ||
                           std::string_view(state) == kNotInRepertoire)) {
    const char* encoding =
        conn ? PQparameterStatus(conn, "server_encoding") : nullptr;
    message = std::string("a message key or payload holds a character that ") +
              "the database encoding (" + (encoding ? encoding : "?") +
              ") cannot represent, or an escape it cannot store";
  }
  const bool broken = conn == nullptr || PQstatus(conn) == CONNECTION_BAD;
  ThrowForSqlState(operation, state ? state : "", message, broken);
}

}  // namespace compaction::pg
