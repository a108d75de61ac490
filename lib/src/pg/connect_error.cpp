#include "pg/connect_error.hpp"

#include <libpq-fe.h>

#include <string>

#include "compaction/errors.hpp"
#include "pg/connection.hpp"
#include "pg/sqlstate.hpp"

namespace compaction::pg {
namespace {

struct Refusal {
  std::string_view sqlstate;
  const char* why;
};

// libpq keeps the server's refusal only as text (PQconnectdb's failed
// connection has no result to read a SQLSTATE from), so the refusals are
// told apart by the server's messages, in PostgreSQL's own wording
// (src/backend/libpq/auth.c and postinit.c).
const Refusal* Classify(PGconn* conn, const std::string& message) {
  static constexpr Refusal kPassword{
      kInvalidPassword, "the server refused the password (wrong password?)"};
  static constexpr Refusal kNoPassword{
      kInvalidPassword,
      "the server asks for a password and none was given (PGPASSWORD, a "
      "passfile, or password in the conninfo)"};
  static constexpr Refusal kMethod{
      kInvalidAuthorization,
      "the server refused it (pg_hba.conf authentication method)"};
  static constexpr Refusal kHba{
      kInvalidAuthorization,
      "pg_hba.conf has no entry admitting this role from this host, or "
      "rejects it"};
  static constexpr Refusal kRole{kInvalidAuthorization,
                                 "the role does not exist or may not log in"};
  if (PQconnectionNeedsPassword(conn)) return &kNoPassword;
  const auto has = [&](const std::string& text) {
    return message.find(text) != std::string::npos;
  };
  if (has("password authentication failed for user")) return &kPassword;
  if (has("authentication failed for user")) return &kMethod;
  if (has("no pg_hba.conf entry") || has("pg_hba.conf rejects connection")) {
    return &kHba;
  }
  const char* user = PQuser(conn);
  if (has("is not permitted to log in") ||
      (user != nullptr &&
       has("role \"" + std::string(user) + "\" does not exist"))) {
    return &kRole;
  }
  return nullptr;
}

}  // namespace

void ThrowConnectFailure(const char* operation, PGconn* conn) {
  const std::string message = TrimmedErrorMessage(conn);
  if (conn != nullptr) {
    if (const Refusal* refusal = Classify(conn, message)) {
      const char* user = PQuser(conn);
      const std::string role = user != nullptr ? user : "";
      throw AuthenticationFailed(
          operation, std::string(refusal->sqlstate), role,
          "authentication failed for role \"" + role + "\": " + refusal->why +
              " (libpq: " + message + ")");
    }
  }
  throw ConnectionLost(operation, "cannot connect: " + message);
}

}  // namespace compaction::pg
