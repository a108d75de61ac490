#include "db_helpers.hpp"

#include <cstdint>

#include "citus_profile.hpp"

namespace testing {

TriggerGate::TriggerGate(LiveDb& db, const std::string& table,
                         const std::string& event, const std::string& when)
    : gate_(db.QuotedSchema() + ".gate") {
  const std::string fn = db.QuotedSchema() + ".gate_wait";
  db.raw().Query("CREATE TABLE " + gate_ + " ()");
  // On Citus the trigger fires on the worker holding the row's shard: the
  // gate is a reference table there, and Close()'s LOCK through the
  // coordinator reaches every node.
  const bool citus = CitusProfile();
  if (citus) {
    db.raw().Query("SELECT pg_catalog.create_reference_table($1::regclass)",
                   {gate_});
  }
  db.raw().Query("CREATE FUNCTION " + fn +
                 "() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
                 "LOCK TABLE " +
                 gate_ +
                 " IN ACCESS SHARE MODE; IF TG_OP = 'DELETE' THEN RETURN "
                 "OLD; END IF; RETURN NEW; END $$");
  // Citus refuses triggers on distributed tables unless told that they
  // are safe; this one only takes a lock.
  if (citus) db.raw().Query("BEGIN");
  if (citus) db.raw().Query("SET LOCAL citus.enable_unsafe_triggers = on");
  db.raw().Query("CREATE TRIGGER gate BEFORE " + event + " ON " + table +
                 " FOR EACH ROW WHEN (" + when + ") EXECUTE FUNCTION " + fn +
                 "()");
  if (citus) db.raw().Query("COMMIT");
}

void TriggerGate::Close() {
  holder_.Query("BEGIN");
  holder_.Query("LOCK TABLE " + gate_ + " IN ACCESS EXCLUSIVE MODE");
}

void TriggerGate::Open() { holder_.Query("COMMIT"); }

void Age(RawConn& raw, const std::string& table, const std::string& key,
         const std::string& age) {
  raw.Query("UPDATE " + table +
                " SET updated_at = now() - $2::interval, "
                "idle_since = now() - $2::interval "
                "WHERE message_key = $1 AND head_id IS NULL",
            {key, age});
}

bool TerminateWhen(RawConn& raw, const std::string& app,
                   const std::string& waiting) {
  std::int64_t pid = 0;
  WaitUntil(
      [&] {
        pid = raw.Int(
            "SELECT coalesce(max(pid), 0) FROM pg_stat_activity "
            "WHERE application_name = $1 AND " +
                waiting,
            {app});
        return pid != 0;
      },
      std::chrono::seconds(10));
  if (pid == 0) return false;
  return raw.Value("SELECT pg_terminate_backend($1)", {std::to_string(pid)}) ==
         "t";
}

}  // namespace testing
