// Scenario 03: list heads page by page; headless (lock-only) keys are skipped.
#include "scenario.hpp"

int main() try {
  using namespace scenario;
  auto client = Open("03");
  auto accounts = client.Topic<Account>("accounts");
  accounts.Register();
  auto producer = accounts.RegisterProducer();
  for (int i = 0; i < 7; ++i) {
    producer.Produce(Account{"user" + std::to_string(i), i},
                     Compacted("acct-" + std::to_string(i)));
  }
  client.InTransaction([&](compaction::Tx& tx) {
    accounts.Key("acct-3a").LockCompactionHead(tx);  // headless: not listed
  });
  std::vector<std::string> seen;
  compaction::ListOptions page{"", 3};
  for (;;) {
    auto heads = accounts.ListCompactionHeads(page);
    if (heads.empty()) break;
    std::cout << "page:";
    for (const auto& h : heads) {
      std::cout << " " << h.message_key;
      seen.push_back(h.message_key);
    }
    std::cout << "\n";
    page.after_key = heads.back().message_key;
  }
  if (seen.size() != 7)
    return Fail("expected 7 heads, saw " + std::to_string(seen.size()));
  std::cout << "listed " << seen.size()
            << " heads; headless acct-3a skipped; stats: "
            << accounts.Stats().headless_rows << " headless row(s)\n";
  Close(client);
  std::cout << "scenario 03 ok\n";
  return 0;
} catch (const std::exception& e) {
  return scenario::Fail(e.what());
}
