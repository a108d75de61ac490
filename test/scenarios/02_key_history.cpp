// Scenario 02: a key's history keeps every version, newest first.
#include "scenario.hpp"

int main() try {
  using namespace scenario;
  auto client = Open("02");
  auto accounts = client.Topic<Account>("accounts");
  accounts.Register();
  auto producer = accounts.RegisterProducer();
  for (std::int64_t balance : {10, 20, 30}) {
    producer.Produce(Account{"bob", balance}, Compacted("acct-7"));
  }
  const auto history = accounts.Key("acct-7").Messages(10);
  std::cout << "history of acct-7 (newest first):";
  for (const auto& m : history)
    std::cout << " #" << m.id << "=" << m.message.balance;
  std::cout << "\n";
  if (history.size() != 3 || history[0].message.balance != 30 ||
      history[2].message.balance != 10) {
    return Fail("history is not 30, 20, 10");
  }
  if (accounts.Key("acct-7").CompactionHead()->message.balance != 30) {
    return Fail("head is not the newest version");
  }
  std::cout << "head is the newest version (30)\n";
  Close(client);
  std::cout << "scenario 02 ok\n";
  return 0;
} catch (const std::exception& e) {
  return scenario::Fail(e.what());
}
