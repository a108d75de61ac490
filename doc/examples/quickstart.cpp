// A balance per account, incremented by four threads at once, starting
// from a key that has no value yet. Run with the PG* variables (or a
// conninfo in place of "") pointing at a database you may create tables in.
#include <compaction/compaction.hpp>
#include <cstdint>
#include <iostream>
#include <thread>
#include <vector>

struct Balance {
  static constexpr int kSchemaVersion = 1;  // stored with every message
  std::int64_t cents = 0;
};
void to_json(nlohmann::json& j, const Balance& b) { j = {{"cents", b.cents}}; }
void from_json(const nlohmann::json& j, Balance& b) {
  j.at("cents").get_to(b.cents);
}

int main() try {
  auto client = compaction::Client::Connect("");  // "": the PG* variables
  client.InstallSchema();                         // idempotent

  auto balances = client.Topic<Balance>("balances");  // no I/O yet
  balances.Register();  // creates the topic and its tables, or keeps them
  auto producer = balances.RegisterProducer();
  const auto account = balances.Key("acct-42");

  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 250; ++i) {
        client.InTransaction([&](compaction::Tx& tx) {
          // Locks the key's row, creating it when the key has no value yet:
          // every other writer of acct-42 waits here until tx ends.
          auto head = account.LockCompactionHead(tx);
          const std::int64_t cents = (head ? head->message.cents : 0) + 1;
          producer.ProduceInTx(tx, Balance{cents},
                               {"acct-42", compaction::CompactionOptions{}});
        });  // commits here, or rolls back if the body throws
      }
    });
  }
  for (auto& t : threads) t.join();

  const auto head = account.CompactionHead();  // a plain read
  std::cout << "acct-42: " << (head ? head->message.cents : 0) << " cents\n";
  std::cout << "newest versions:";
  for (const auto& m : account.Messages(3)) std::cout << " " << m.message.cents;
  std::cout << "\n";

  producer.ProduceTombstone("acct-42");  // deletes the value, compacted
  std::cout << "after the tombstone: "
            << (account.CompactionHead() ? "a value" : "no value") << "\n";
  return 0;
} catch (const compaction::Error& e) {
  std::cerr << e.operation() << ": " << e.what() << "\n";
  return 1;
}
