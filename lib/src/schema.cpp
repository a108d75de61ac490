// The system baseline: installation and the version gate; the shipped
// least-privilege roles.
#include "schema.hpp"

#include <algorithm>
#include <cstdint>
#include <string_view>

#include "compaction/client.hpp"
#include "pg/sqlstate.hpp"
#include "sql_text.hpp"
#include "tx_internal.hpp"

namespace compaction::detail {
namespace {

// 64-bit FNV-1a: a fingerprint to tell builds apart, not a security
// measure (whoever can write the table can write any value).
class Fnv1a64 {
 public:
  Fnv1a64& Add(std::string_view text) {
    for (unsigned char c : text) {
      hash_ ^= c;
      hash_ *= 0x100000001b3ULL;
    }
    return *this;
  }
  std::string Hex() const {
    static constexpr char kDigits[] = "0123456789abcdef";
    std::string out(16, '0');
    for (int i = 15, shift = 0; i >= 0; --i, shift += 4) {
      out[static_cast<std::size_t>(i)] = kDigits[(hash_ >> shift) & 0xF];
    }
    return out;
  }

 private:
  std::uint64_t hash_ = 0xcbf29ce484222325ULL;
};

// The baselines put the quoted schema inside dollar-quoted function and DO
// bodies, where a '$' of the name could end the quoting early, and inside
// the string literals of the SQL those functions build, where a "'" could
// end the literal: "a'||'b" installed, and the janitor's SECURITY DEFINER
// sweeps then read the TTLs of a schema "ab" whoever creates it controls.
void ValidateInstallableSchema(const ClientCore& core, const char* operation) {
  const std::string& schema = core.options().schema;
  for (const char c : {'$', '\''}) {
    if (schema.find(c) != std::string::npos) {
      throw InvalidArgument(operation,
                            std::string("schema name must not contain '") + c +
                                "' to be installed");
    }
  }
}

std::string SystemBaseline(const ClientCore& core, pg_conn* conn,
                           const char* operation) {
  const auto literal = [&](const std::string& text) {
    return pg::QuoteLiteral(conn, text, operation);
  };
  return sql::Render(sql::k_system_v1,
                     {{"{schema}", core.schema()},
                      {"{schema_name}", literal(core.options().schema)},
                      {"{topic_v1}", literal(std::string(sql::k_topic_v1))},
                      {"{topic_fingerprint}", literal(TopicFingerprint())}});
}

// The distributed layout, run after the system baseline.
std::string CitusLayout(const ClientCore& core, pg_conn* conn,
                        const char* operation) {
  return sql::Render(
      sql::k_citus_v1,
      {{"{schema}", core.schema()},
       {"{schema_name}",
        pg::QuoteLiteral(conn, core.options().schema, operation)},
       {"{citus_topic_v1}",
        pg::QuoteLiteral(conn, std::string(sql::k_citus_topic_v1),
                         operation)}});
}

const char* ProfileName(Profile profile) {
  return profile == Profile::kCitus ? "citus" : "single";
}

// The profile of the database itself: Citus when the citus extension is
// created in it (on a Citus coordinator).
Profile DatabaseProfile(pg::Session session, const char* operation) {
  pg::Result r = pg::Exec(session, operation,
                          "SELECT EXISTS (SELECT FROM pg_catalog.pg_extension "
                          "WHERE extname = 'citus')");
  return pg::Bool(r, 0, 0) ? Profile::kCitus : Profile::kSingle;
}

// Errors a concurrent installer can cause us: both pass IF NOT EXISTS (or
// a pg_namespace / pg_roles check) and one loses on the catalog's unique
// index.
bool IsInstallRace(const DatabaseError& e) {
  return e.sqlstate() == pg::kUniqueViolation ||
         e.sqlstate() == pg::kDuplicateSchema ||
         e.sqlstate() == pg::kDuplicateTable ||
         e.sqlstate() == pg::kDuplicateObject;
}

template <class F>
void RetryingInstallRace(F&& once) {
  try {
    once();
  } catch (const DatabaseError& e) {
    if (!IsInstallRace(e)) throw;
    once();  // the winner has committed: this sees its work
  }
}

void InstallOnce(ClientCore& core) {
  constexpr const char* kOp = "InstallSchema";
  Tx tx = BeginTx(core);
  const pg::Session session = TxGate::State(tx).session();
  const std::optional<int> found = InstalledSystemVersion(core, session, kOp);
  if (found) {
    if (*found != kSystemBaselineVersion) {
      throw SchemaVersionMismatch(kOp, "schema " + core.schema(), *found,
                                  kSystemBaselineVersion);
    }
    return;  // already installed: the Tx rolls back nothing
  }
  const Profile profile = DatabaseProfile(session, kOp);
  pg::ExecScript(session, kOp, SystemBaseline(core, session.conn, kOp));
  if (profile == Profile::kCitus) {
    pg::ExecScript(session, kOp, CitusLayout(core, session.conn, kOp));
  }
  pg::Exec(session, kOp,
           "INSERT INTO " + core.schema() +
               ".schema_version (topic_id, version, fingerprint, profile) "
               "VALUES (NULL, $1::int, $2::text, $3::text)",
           pg::Params()
               .Add(kSystemBaselineVersion)
               .Add(SystemFingerprint(profile))
               .Add(ProfileName(profile)));
  tx.Commit();
  core.set_citus(profile == Profile::kCitus);
}

bool IsRoleChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
}

// Plain lowercase names: no quoting surprises for the DBA who grants them,
// and safe to spell inside the literals and bodies of roles_v1.sql.
std::string ValidRoleName(const char* operation, const std::string& name) {
  const bool plain = !name.empty() && name.size() <= 63 &&
                     !(name[0] >= '0' && name[0] <= '9') &&
                     name.rfind("pg_", 0) != 0 &&
                     std::all_of(name.begin(), name.end(), IsRoleChar);
  if (!plain) {
    throw InvalidArgument(
        operation,
        "role name \"" + name.substr(0, 70) +
            "\" must be 1-63 characters of a-z, 0-9, '_', not start with a "
            "digit or \"pg_\" (choose a role prefix)");
  }
  return name;
}

void InstallRolesOnce(ClientCore& core, const RoleNames& names) {
  constexpr const char* kOp = "InstallRoles";
  Tx tx = BeginTx(core);
  const pg::Session session = TxGate::State(tx).session();
  RequireSystemBaseline(core, session, kOp);
  // The names are plain (ValidRoleName), so quoting cannot fail or differ.
  auto quoted = [](const std::string& role) { return "\"" + role + "\""; };
  pg::ExecScript(
      session, kOp,
      sql::Render(sql::k_roles_v1,
                  {{"{schema}", core.schema()},
                   {"{schema_name}",
                    pg::QuoteLiteral(session.conn, core.options().schema, kOp)},
                   {"{owner_role}", quoted(names.owner)},
                   {"{app_role}", quoted(names.app)},
                   {"{janitor_role}", quoted(names.janitor)},
                   {"{monitor_role}", quoted(names.monitor)}}));
  tx.Commit();
}

}  // namespace

const std::string& SystemFingerprint(Profile profile) {
  static const std::string single = Fnv1a64()
                                        .Add(sql::k_system_v1)
                                        .Add(std::string_view("\0", 1))
                                        .Add(sql::k_topic_v1)
                                        .Hex();
  // The distributed layout is part of the baseline it installs.
  static const std::string citus = Fnv1a64()
                                       .Add(sql::k_system_v1)
                                       .Add(std::string_view("\0", 1))
                                       .Add(sql::k_topic_v1)
                                       .Add(std::string_view("\0", 1))
                                       .Add(sql::k_citus_v1)
                                       .Add(std::string_view("\0", 1))
                                       .Add(sql::k_citus_topic_v1)
                                       .Hex();
  return profile == Profile::kCitus ? citus : single;
}

const std::string& TopicFingerprint() {
  static const std::string fingerprint = Fnv1a64().Add(sql::k_topic_v1).Hex();
  return fingerprint;
}

void RequireSystemBaseline(ClientCore& core, pg::Session session,
                           const char* operation) {
  const int found =
      InstalledSystemVersion(core, session, operation).value_or(0);
  if (found != kSystemBaselineVersion) {
    throw SchemaVersionMismatch(operation, "schema " + core.schema(), found,
                                kSystemBaselineVersion);
  }
}

void CheckTopicBaseline(const char* operation, const std::string& topic_name,
                        int version,
                        std::optional<std::string_view> fingerprint) {
  const bool same_fingerprint =
      fingerprint && *fingerprint == TopicFingerprint();
  if (version == kTopicBaselineVersion && same_fingerprint) return;
  const std::string subject = "topic \"" + topic_name + "\" baseline";
  if (version != kTopicBaselineVersion) {
    throw SchemaVersionMismatch(operation, subject, version,
                                kTopicBaselineVersion);
  }
  throw SchemaVersionMismatch(operation, subject, version,
                              std::string(fingerprint.value_or("")),
                              TopicFingerprint());
}

std::optional<int> InstalledSystemVersion(ClientCore& core, pg::Session session,
                                          const char* operation) {
  // to_regclass answers NULL instead of failing, so this never aborts the
  // surrounding transaction.
  pg::Result exists = pg::Exec(
      session, operation, "SELECT pg_catalog.to_regclass($1::text) IS NOT NULL",
      pg::Params().Add(core.schema() + ".schema_version"));
  if (!pg::Bool(exists, 0, 0)) return std::nullopt;
  // The fingerprint and profile through to_jsonb: a database from a build
  // before the columns existed answers NULL instead of failing the
  // statement. The database's own profile in the same round trip.
  pg::Result r = pg::Exec(
      session, operation,
      "SELECT v.version, pg_catalog.to_jsonb(v) ->> 'fingerprint', "
      "pg_catalog.to_jsonb(v) ->> 'profile', EXISTS (SELECT FROM "
      "pg_catalog.pg_extension WHERE extname = 'citus') FROM " +
          core.schema() + ".schema_version v WHERE v.topic_id IS NULL");
  if (r.rows() == 0) return 0;
  const int version = static_cast<int>(pg::Int64(r, 0, 0));
  const std::string fingerprint =
      pg::IsNull(r, 0, 1) ? std::string() : std::string(pg::Text(r, 0, 1));
  if (version != kSystemBaselineVersion) return version;
  const std::string installed =
      pg::IsNull(r, 0, 2) ? "single" : std::string(pg::Text(r, 0, 2));
  const Profile profile =
      installed == "citus" ? Profile::kCitus : Profile::kSingle;
  // The profile first: a layout for the other kind of database is the
  // larger mismatch, whatever build installed it.
  const Profile database =
      pg::Bool(r, 0, 3) ? Profile::kCitus : Profile::kSingle;
  if (profile != database) {
    throw SchemaProfileMismatch(operation, "schema " + core.schema(), version,
                                ProfileName(profile), ProfileName(database));
  }
  if (fingerprint != SystemFingerprint(profile)) {
    throw SchemaVersionMismatch(operation, "schema " + core.schema(), version,
                                fingerprint, SystemFingerprint(profile));
  }
  core.set_citus(profile == Profile::kCitus);
  return version;
}

void InstallSchema(ClientCore& core) {
  ValidateInstallableSchema(core, "InstallSchema");
  RetryingInstallRace([&] { InstallOnce(core); });
}

RoleNames RoleNamesFor(const ClientCore& core, const std::string& prefix) {
  constexpr const char* kOp = "InstallRoles";
  const std::string base = prefix.empty() ? core.options().schema : prefix;
  return RoleNames{ValidRoleName(kOp, base + "_owner"),
                   ValidRoleName(kOp, base + "_app"),
                   ValidRoleName(kOp, base + "_janitor"),
                   ValidRoleName(kOp, base + "_monitor")};
}

void InstallRoles(ClientCore& core, const std::string& prefix) {
  ValidateInstallableSchema(core, "InstallRoles");
  const RoleNames names = RoleNamesFor(core, prefix);
  RetryingInstallRace([&] { InstallRolesOnce(core, names); });
}

}  // namespace compaction::detail
