// Scenario 04: the compaction rank decides the head; a lower rank never
// replaces a higher one, whatever the arrival order.
#include "scenario.hpp"

int main() try {
  using namespace scenario;
  auto client = Open("04");
  auto prices = client.Topic<Account>("prices");
  prices.Register();
  auto producer = prices.RegisterProducer();
  // Versions arrive out of order; rank is the source's sequence number.
  for (std::int64_t seq : {3, 1, 5, 2, 4}) {
    const auto r =
        producer.Produce(Account{"feed", seq * 100}, Compacted("sku-1", seq));
    std::cout << "produced rank " << seq
              << " -> head advanced: " << std::boolalpha << r.head_advanced
              << "\n";
  }
  auto head = prices.Key("sku-1").CompactionHead();
  if (!head || head->compaction_rank != 5 || head->message.balance != 500) {
    return Fail("head is not the rank-5 version");
  }
  std::cout << "head of sku-1 has rank " << *head->compaction_rank << " (value "
            << head->message.balance << ")\n";
  Close(client);
  std::cout << "scenario 04 ok\n";
  return 0;
} catch (const std::exception& e) {
  return scenario::Fail(e.what());
}
