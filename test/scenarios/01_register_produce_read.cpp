// Scenario 01: register a topic, produce a compacted message, read its head.
#include "scenario.hpp"

int main() try {
  using namespace scenario;
  auto client = Open("01");
  auto accounts = client.Topic<Account>("accounts");
  const auto info = accounts.Register();
  std::cout << "registered topic " << info.name << " (id " << info.id
            << ", headless ttl " << info.headless_ttl.count() << " ms)\n";
  auto producer = accounts.RegisterProducer();
  const auto produced =
      producer.Produce(Account{"ada", 100}, Compacted("acct-1"));
  std::cout << "produced message " << produced.id
            << " for acct-1, head advanced: " << std::boolalpha
            << produced.head_advanced << "\n";
  auto head = accounts.Key("acct-1").CompactionHead();
  if (!head || head->message.balance != 100 || head->id != produced.id) {
    return Fail("head of acct-1 is not the produced message");
  }
  std::cout << "head of acct-1: message " << head->id
            << " owner=" << head->message.owner
            << " balance=" << head->message.balance << "\n";
  if (accounts.Key("acct-2").CompactionHead()) return Fail("acct-2 has a head");
  std::cout << "acct-2 has no head\n";
  Close(client);
  std::cout << "scenario 01 ok\n";
  return 0;
} catch (const std::exception& e) {
  return scenario::Fail(e.what());
}
