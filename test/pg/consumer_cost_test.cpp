// Consumers, guarantee 6 (bounded cost): a Poll reads in proportion to its
// batch, not to the log. Counted in the index blocks the Poll's own
// transaction touched (pg_stat_get_xact_blocks_fetched), not in time.
#include <catch2/catch.hpp>

#include "consumer_support.hpp"
#include "live_db.hpp"

using compaction::ConsumerOptions;
using compaction::Tx;
using testing::ConsumeAll;
using testing::Counter;
using testing::LiveDb;
using testing::RawConn;

namespace {

// Index blocks of `index` a Poll of `consumer` touches, and its deliveries.
std::pair<std::int64_t, std::size_t> PollBlocks(
    compaction::Consumer<Counter>& consumer, const std::string& index) {
  RawConn own;
  own.Query("BEGIN");
  Tx tx = Tx::Borrow(own.get());
  const std::size_t got = consumer.Poll(tx).size();
  const std::int64_t blocks =
      own.Int("SELECT pg_stat_get_xact_blocks_fetched($1::regclass)", {index});
  own.Query("COMMIT");
  return {blocks, got};
}

}  // namespace

TEST_CASE("a Poll in the tail of a large log reads a few index pages") {
  LiveDb db;
  auto topic = db.client().Topic<Counter>("tail");
  topic.Register();
  const std::string message = db.MessageTable("tail");
  const std::string index = message + "_consume";
  // 100,000 messages in 100 transactions: about 400 leaf pages of the
  // consumers' index.
  for (int i = 0; i < 100; ++i) {
    db.raw().Query("INSERT INTO " + message +
                   " (message_key, schema_version, payload) SELECT 'k' || g, "
                   "1, '{\"value\": 1}' FROM generate_series(1, 1000) g");
  }
  db.raw().Query("VACUUM ANALYZE " + message);
  auto consumer = topic.Consumer("c", ConsumerOptions{10000, false});
  REQUIRE(ConsumeAll(db.client(), consumer).size() == 100000);
  topic.RegisterProducer().Produce(Counter{7});
  // The window after the log: the index scan starts at the last window's
  // xmax, not at the partition's first entry.
  const auto [blocks, got] = PollBlocks(consumer, index);
  CHECK(got == 1);
  INFO("index blocks touched: " << blocks);
  CHECK(blocks < 20);
}
