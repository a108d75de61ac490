// The sweep's delete rate on 100,000 expired rows next to 100,000
// materialized heads, per batch size. Not a ctest test: run
//   ./sweep_bench
// with the PG* variables of a throwaway cluster.
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdint>
#include <iostream>

#include "live_db.hpp"

using compaction::Janitor;
using compaction::SweepOptions;
using compaction::SweepResult;
using testing::Counter;
using testing::InsertHeadless;
using testing::LiveDb;

TEST_CASE("sweep delete rate on 100,000 expired rows") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>("bench");
  topic.Register();
  const std::string table = db.HeadTable("bench");
  Janitor janitor(db.client());
  for (int batch_size : {1000, 5000}) {
    // Next to 100,000 materialized heads the sweep must not touch.
    db.raw().Query("TRUNCATE " + table);
    db.raw().Query("INSERT INTO " + table +
                   " (message_key, head_id, schema_version, compaction_rank, "
                   "created_at, updated_at) SELECT 'm-' || g, g, 1, 0, now(), "
                   "now() FROM generate_series(1, 100000) g");
    InsertHeadless(db.raw(), table, "h-", 100000);
    db.raw().Query("VACUUM ANALYZE " + table);
    SweepOptions options;
    options.batch_size = batch_size;
    const auto started = std::chrono::steady_clock::now();
    const SweepResult r = janitor.SweepHeadless("bench", options);
    const std::chrono::duration<double> took =
        std::chrono::steady_clock::now() - started;
    REQUIRE(r.deleted == 100000);
    REQUIRE(db.raw().Int("SELECT count(*) FROM " + table) == 100000);
    std::cout << "batch_size " << batch_size << ": deleted " << r.deleted
              << " rows in " << r.batches << " batches, " << took.count()
              << " s, " << static_cast<std::int64_t>(r.deleted / took.count())
              << " rows/s\n";
  }
}
