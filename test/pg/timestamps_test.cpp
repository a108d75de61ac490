// Rows with timestamps no server clock wrote ('infinity', -infinity, the
// year 9999), planted as the owner with every user trigger off (so these
// tests hold whatever the baseline refuses for new writes), and the cleaner
// lag against SQL truth while a backlog is walked in small batches.
#include <catch2/catch.hpp>

#include "live_db.hpp"

using compaction::CompactResult;
using compaction::Janitor;
using compaction::SweepOptions;
using compaction::TopicConfig;
using testing::Compacted;
using testing::Counter;
using testing::LiveDb;
using namespace std::chrono_literals;

namespace {

TopicConfig OneMinute() {
  TopicConfig config;
  config.retention = 1min;
  config.tombstone_retention = 1min;
  return config;
}

// Runs `sql` with the table's user triggers off (superuser, as a careless
// or hostile writer before the baseline refused such rows would have).
void Planted(LiveDb& db, const std::string& table, const std::string& sql) {
  db.raw().Query("ALTER TABLE " + table + " DISABLE TRIGGER USER");
  db.raw().Query(sql);
  db.raw().Query("ALTER TABLE " + table + " ENABLE TRIGGER USER");
}

// Inserts a message of `key` created at `at`, with the next identity.
void PlantMessage(LiveDb& db, const std::string& topic, const std::string& key,
                  const std::string& at) {
  const std::string table = db.MessageTable(topic);
  Planted(db, table,
          "INSERT INTO " + table +
              " (message_key, schema_version, compaction_rank, payload, "
              "created_at) VALUES ('" +
              key + "', 1, 0, '{\"value\": 0}', '" + at + "')");
}

// The truth the lag reports: how long ago the oldest removable message (out
// of retention, not its key's head, not planted in the future) fell out of
// the retention, in seconds; 0 when none.
double TrueLagSeconds(LiveDb& db, const std::string& topic) {
  return std::stod(*db.raw().Value(
      "SELECT coalesce(extract(epoch FROM c.cutoff - (SELECT min(m.created_at) "
      "FROM " +
      db.MessageTable(topic) +
      " m WHERE m.created_at < c.cutoff AND NOT EXISTS (SELECT 1 FROM " +
      db.HeadTable(topic) +
      " h WHERE h.message_key = m.message_key AND h.head_id = m.id))), 0) "
      "FROM (SELECT now() - t.retention_ms * interval '1 millisecond' AS "
      "cutoff FROM " +
      db.QuotedSchema() + ".topic t WHERE t.name = '" + topic + "') c"));
}

double Seconds(std::chrono::milliseconds ms) { return ms.count() / 1000.0; }

}  // namespace

TEST_CASE("planted timestamps blind neither the stats nor the cleaner") {
  LiveDb db;
  auto bad = db.client().Topic<Counter>("bad");
  auto good = db.client().Topic<Counter>("good");
  bad.Register(OneMinute());
  good.Register(OneMinute());
  auto producer = bad.RegisterProducer();
  for (int i = 0; i < 3; ++i) producer.Produce(Counter{i}, Compacted("a"));
  PlantMessage(db, "bad", "inf", "infinity");
  PlantMessage(db, "bad", "far", "9999-01-01");
  for (int i = 3; i < 6; ++i) producer.Produce(Counter{i}, Compacted("a"));
  good.RegisterProducer().Produce(Counter{1}, Compacted("g"));
  // Everything else two hours old: all but a's head is out of retention.
  const std::string message = db.MessageTable("bad");
  Planted(db, message,
          "UPDATE " + message +
              " SET created_at = now() - interval '2 hours' "
              "WHERE created_at < now() + interval '1 day'");
  // Head rows of every kind of bad time, and the cleaner's saved position
  // as the cleaner before this fix left it.
  const std::string head = db.HeadTable("bad");
  Planted(db, head,
          "INSERT INTO " + head +
              " (message_key, created_at, updated_at, idle_since) VALUES "
              "('h1', 'infinity', 'infinity', 'infinity'), "
              "('h2', '-infinity', '-infinity', '-infinity'), "
              "('h3', '9999-01-01', '9999-01-01', '9999-01-01'), "
              "('ok', now() - interval '5 minutes', "
              "now() - interval '5 minutes', now() - interval '5 minutes')");
  const std::string state = db.QuotedSchema() + ".log_cleaner_state";
  Planted(db, state,
          "UPDATE " + state +
              " SET next_created_at = 'infinity', scanned_at = 'infinity', "
              "last_success_at = 'infinity' WHERE topic_id = " +
              std::to_string(db.TopicId("bad")));

  // The stats: every topic reports, the bad rows are counted and skipped.
  compaction::TopicStats stats;
  REQUIRE_NOTHROW(stats = bad.Stats());
  CHECK(stats.invalid_timestamp_rows == 3);
  CHECK(stats.headless_rows == 4);
  CHECK(stats.oldest_headless_age >= 4min);
  CHECK(stats.oldest_headless_age <= 6min);
  const auto all = db.client().ListTopicStats();
  REQUIRE(all.size() == 2);
  for (const auto& t : all) CHECK(t.error.empty());
  CHECK(all[0].stats.invalid_timestamp_rows == 3);
  CHECK(all[1].stats.invalid_timestamp_rows == 0);
  // A read of the planted message does not fail either.
  CHECK(bad.Key("inf").Messages(10).size() == 1);

  // The cleaner passes the planted messages and removes everything due
  // behind and after them: a's five superseded versions.
  Janitor janitor(db.client());
  std::int64_t deleted = 0;
  for (int i = 0; i < 4; ++i) {
    deleted += janitor.CompactLog("bad").deleted;
  }
  CHECK(deleted == 5);
  CHECK(db.raw().Int("SELECT count(*) FROM " + message) == 3);
  // The planted ones are kept (never due), and no longer hold the walk.
  CHECK(db.raw().Int("SELECT count(*) FROM " + message +
                     " WHERE message_key IN ('inf', 'far')") == 2);
  CHECK(db.raw().Int("SELECT count(*) FROM " + db.QuotedSchema() +
                     ".log_cleaner_state WHERE next_created_at > now() + "
                     "interval '1 hour'") == 0);
  stats = bad.Stats();
  CHECK(stats.cleaner_lag == 0ms);
  CHECK(stats.cleaner.last_error.empty());
}

TEST_CASE("the cleaner lag follows a backlog walked in small batches") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>("lag");
  topic.Register(OneMinute());
  auto producer = topic.RegisterProducer();
  // 20 keys, 40 versions each: 780 removable messages, one second apart,
  // the oldest two hours old.
  for (int v = 0; v < 40; ++v) {
    for (int k = 0; k < 20; ++k) {
      producer.Produce(Counter{v}, Compacted("k" + std::to_string(k)));
    }
  }
  const std::string message = db.MessageTable("lag");
  Planted(db, message,
          "UPDATE " + message +
              " SET created_at = now() - interval '2 hours' + "
              "id * interval '1 second'");
  SweepOptions small;
  small.batch_size = 50;
  small.max_batches = 2;  // the (empty) tombstone walk, one message batch
  Janitor janitor(db.client());
  int checked = 0;
  for (int pass = 0; pass < 80; ++pass) {
    const CompactResult r = janitor.CompactLog("lag", small);
    const double truth = TrueLagSeconds(db, "lag");
    const double lag = Seconds(topic.Stats().cleaner_lag);
    INFO("pass " << pass << " truth " << truth << " s, reported " << lag
                 << ", deleted " << r.deleted << ", skipped " << r.skipped
                 << ", " << r.claimed_by);
    CHECK(lag >= truth - 2);
    CHECK(lag <= truth + 2);
    if (truth > 60) ++checked;
    if (r.deleted == 0 && !r.stopped_at_limit) break;
  }
  CHECK(checked >= 10);
  CHECK(TrueLagSeconds(db, "lag") == 0);
  CHECK(topic.Stats().cleaner_lag == 0ms);
}
