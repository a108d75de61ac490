// Keys order by their bytes whatever the database's collation: the heads
// list and page in byte order, and a batch (which locks its keys in byte
// order) stores each key's head. [direct]: the test creates its own
// database, which the PgBouncer of the pooler run does not serve.
#include <catch2/catch.hpp>
#include <random>

#include "live_db.hpp"

using compaction::Client;
using compaction::ClientOptions;
using compaction::ListOptions;
using compaction::Outgoing;
using testing::Compacted;
using testing::Counter;
using testing::RawConn;

namespace {

// A database whose default collation (ICU's en-US, which the server has
// without any system locale) sorts "a" before "B"; dropped afterwards.
struct EnUsDb {
  RawConn admin;
  std::string name = "order_en_us_" + std::to_string(std::random_device{}());
  EnUsDb() {
    admin.Query("CREATE DATABASE " + name +
                " LOCALE_PROVIDER icu ICU_LOCALE 'en-US' LOCALE 'C.UTF-8' "
                "TEMPLATE template0");
  }
  ~EnUsDb() { admin.TryExec("DROP DATABASE " + name + " WITH (FORCE)"); }
};

}  // namespace

TEST_CASE("heads list and page in byte order under an en-US collation",
          "[direct]") {
  EnUsDb db;
  RawConn raw("dbname=" + db.name);
  // The collation the keys would otherwise follow.
  REQUIRE(*raw.Value("SELECT 'a' < 'B'") == "t");
  Client client = Client::Connect("dbname=" + db.name, ClientOptions{});
  client.InstallSchema();
  auto topic = client.Topic<Counter>("order");
  topic.Register();
  auto producer = topic.RegisterProducer();
  const std::vector<std::string> bytes = {"A", "B", "_x", "a", "b"};
  producer.Produce(Counter{1}, Compacted("b"));
  producer.Produce(Counter{2}, Compacted("_x"));
  std::vector<Outgoing<Counter>> batch;
  for (const char* key : {"B", "a", "A", "b"}) {
    batch.push_back(Outgoing<Counter>{Counter{3}, Compacted(key)});
  }
  for (const auto& r : producer.ProduceBatch(batch)) CHECK(r.head_advanced);

  std::vector<std::string> all;
  for (const auto& head : topic.ListCompactionHeads()) {
    CHECK(head.message.value == (head.message_key == "_x" ? 2 : 3));
    all.push_back(head.message_key);
  }
  CHECK(all == bytes);
  std::vector<std::string> paged;
  std::string after;
  for (int page = 0; page < 10; ++page) {
    const auto heads = topic.ListCompactionHeads(ListOptions{after, 2});
    if (heads.empty()) break;
    for (const auto& head : heads) paged.push_back(head.message_key);
    after = heads.back().message_key;
  }
  CHECK(paged == bytes);
}
