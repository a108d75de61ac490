// A database in another encoding than UTF-8: the library pins
// client_encoding, so keys written by a LATIN1 client read back as UTF-8,
// page, and pass back in; a key the database cannot represent is a typed
// error that quotes none of its bytes. [direct]: the test creates its own
// database, which the PgBouncer of the pooler run does not serve.
#include <catch2/catch.hpp>
#include <functional>
#include <random>

#include "live_db.hpp"

using compaction::Client;
using compaction::ClientOptions;
using compaction::ListOptions;
using testing::Compacted;
using testing::Counter;
using testing::RawConn;

namespace {

// A LATIN1 database of its own, dropped afterwards.
struct Latin1Db {
  RawConn admin;
  std::string name = "enc_latin1_" + std::to_string(std::random_device{}());
  Latin1Db() {
    admin.Query("CREATE DATABASE " + name +
                " ENCODING 'LATIN1' LC_COLLATE 'C' LC_CTYPE 'C' "
                "TEMPLATE template0");
  }
  ~Latin1Db() { admin.TryExec("DROP DATABASE " + name + " WITH (FORCE)"); }
};

}  // namespace

TEST_CASE("a LATIN1 database's keys read as UTF-8, page and pass back in",
          "[direct]") {
  Latin1Db db;
  const std::string cafe = "caf\xc3\xa9";  // UTF-8
  for (const bool prepared : {true, false}) {
    INFO("prepared_statements " << prepared);
    ClientOptions options;
    options.prepared_statements = prepared;
    options.schema = prepared ? "enc_prepared" : "enc_unnamed";
    Client client = Client::Connect("dbname=" + db.name, options);
    client.InstallSchema();
    auto topic = client.Topic<Counter>("enc");
    topic.Register();
    auto producer = topic.RegisterProducer();
    producer.Produce(Counter{1}, Compacted("a"));
    producer.Produce(Counter{3}, Compacted("z"));

    // caf\xe9 as a LATIN1 client sends it, written as the owner would.
    RawConn latin1("dbname=" + db.name + " client_encoding=LATIN1");
    const std::string schema = "\"" + options.schema + "\"";
    const std::string id =
        *latin1.Value("SELECT id FROM " + schema + ".topic WHERE name = 'enc'");
    latin1.Query("WITH m AS (INSERT INTO " + schema + ".message_" + id +
                 " (message_key, schema_version, compaction_rank, payload) "
                 "VALUES ('caf\xe9', 1, 0, '{\"value\": 2}') "
                 "RETURNING id, message_key, created_at) "
                 "INSERT INTO " +
                 schema + ".compaction_head_" + id +
                 " (message_key, head_id, schema_version, compaction_rank, "
                 "created_at, updated_at, idle_since) "
                 "SELECT message_key, id, 1, 0, created_at, created_at, NULL "
                 "FROM m");

    std::vector<std::string> keys;
    std::string after;
    for (int page = 0; page < 5; ++page) {
      const auto heads = topic.ListCompactionHeads(ListOptions{after, 1});
      if (heads.empty()) break;
      keys.push_back(heads[0].message_key);
      after = heads[0].message_key;
    }
    CHECK(keys == std::vector<std::string>{"a", cafe, "z"});
    CHECK(topic.Key(cafe).CompactionHead()->message.value == 2);
    CHECK(topic.Key(cafe).Messages(10).size() == 1);
    producer.Produce(Counter{4}, Compacted(cafe));
    CHECK(topic.Key(cafe).CompactionHead()->message.value == 4);

    // The euro sign has no LATIN1 byte: a typed error naming the encoding,
    // not the bytes (0xe2 0x82 0xac), as a key and in a payload.
    for (const auto& attempt : std::vector<std::function<void()>>{
             [&] { producer.Produce(Counter{5}, Compacted("\xe2\x82\xac")); },
             [&] {
               client.Topic<compaction::RawMessage>("enc")
                   .RegisterProducer()
                   .Produce(
                       compaction::RawMessage{1, {{"value", "\xe2\x82\xac"}}},
                       Compacted("euro"));
             }}) {
      try {
        attempt();
        FAIL("stored");
      } catch (const compaction::DatabaseError& e) {
        CHECK(e.sqlstate() == "22P05");
        CHECK_THAT(e.what(), Catch::Contains("database encoding (LATIN1)") &&
                                 !Catch::Contains("0xe2") &&
                                 !Catch::Contains("\xe2\x82\xac"));
      }
    }
  }
}
