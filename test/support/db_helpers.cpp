#include "db_helpers.hpp"

namespace testing {

TriggerGate::TriggerGate(LiveDb& db, const std::string& table,
                         const std::string& event, const std::string& when)
    : gate_(db.QuotedSchema() + ".gate") {
  const std::string fn = db.QuotedSchema() + ".gate_wait";
  db.raw().Query("CREATE TABLE " + gate_ + " ()");
  db.raw().Query("CREATE FUNCTION " + fn +
                 "() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
                 "LOCK TABLE " +
                 gate_ +
                 " IN ACCESS SHARE MODE; IF TG_OP = 'DELETE' THEN RETURN "
                 "OLD; END IF; RETURN NEW; END $$");
  db.raw().Query("CREATE TRIGGER gate BEFORE " + event + " ON " + table +
                 " FOR EACH ROW WHEN (" + when + ") EXECUTE FUNCTION " + fn +
                 "()");
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

}  // namespace testing
