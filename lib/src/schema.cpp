// The system baseline: installation and the version gate.
#include "schema.hpp"

#include "compaction/client.hpp"
#include "pg/sqlstate.hpp"
#include "sql_text.hpp"
#include "tx_internal.hpp"

namespace compaction::detail {
namespace {

std::string SystemBaseline(const ClientCore& core) {
  return sql::Render(sql::k_system_v1, {{"{schema}", core.schema()}});
}

// Errors a concurrent installer can cause us: both pass IF NOT EXISTS and
// one loses on the catalog's unique index.
bool IsInstallRace(const DatabaseError& e) {
  return e.sqlstate() == pg::kUniqueViolation || e.sqlstate() == "42P06" ||
         e.sqlstate() == "42P07" || e.sqlstate() == "42710";
}

void InstallOnce(ClientCore& core) {
  constexpr const char* kOp = "InstallSchema";
  Tx tx = BeginTx(core);
  const pg::Session session = tx.state().session();
  const std::optional<int> found = InstalledSystemVersion(core, session, kOp);
  if (found) {
    if (*found != kSystemBaselineVersion) {
      throw SchemaVersionMismatch(kOp, "schema " + core.schema(), *found,
                                  kSystemBaselineVersion);
    }
    return;  // already installed: the Tx rolls back nothing
  }
  pg::ExecScript(session.conn, kOp, SystemBaseline(core));
  pg::Exec(session, kOp,
           "INSERT INTO " + core.schema() +
               ".schema_version (topic_id, version) VALUES (NULL, $1)",
           pg::Params().Add(kSystemBaselineVersion));
  tx.Commit();
}

}  // namespace

std::optional<int> InstalledSystemVersion(ClientCore& core,
                                          pg::Session session,
                                          const char* operation) {
  // to_regclass answers NULL instead of failing, so this never aborts the
  // surrounding transaction.
  pg::Result exists = pg::Exec(
      session, operation, "SELECT to_regclass($1) IS NOT NULL",
      pg::Params().Add(core.schema() + ".schema_version"));
  if (!pg::Bool(exists.get(), 0, 0)) return std::nullopt;
  pg::Result r = pg::Exec(session, operation,
                          "SELECT version FROM " + core.schema() +
                              ".schema_version WHERE topic_id IS NULL");
  if (PQntuples(r.get()) == 0) return 0;
  return static_cast<int>(pg::Int64(r.get(), 0, 0));
}

void InstallSchema(ClientCore& core) {
  try {
    InstallOnce(core);
  } catch (const DatabaseError& e) {
    if (!IsInstallRace(e)) throw;
    InstallOnce(core);  // the winner has committed: this sees it installed
  }
}

}  // namespace compaction::detail
