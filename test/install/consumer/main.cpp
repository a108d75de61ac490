// Uses the public API (README.md, API reference) from installed headers.
#include <compaction/compaction.hpp>
#include <iostream>

struct Greeting {
  static constexpr int kSchemaVersion = 1;
  std::string text;
};
void to_json(nlohmann::json& j, const Greeting& g) { j = {{"text", g.text}}; }
void from_json(const nlohmann::json& j, Greeting& g) {
  j.at("text").get_to(g.text);
}

int main(int argc, char** argv) {
  if (argc < 2) {  // built only: prove the names compile and link
    std::cout << "consumer built\n";
    return 0;
  }
  compaction::ClientOptions options;
  options.schema = argv[1];
  auto client = compaction::Client::Connect("", options);
  client.InstallSchema();
  compaction::TopicHandle<Greeting> topic = client.Topic<Greeting>("greetings");
  compaction::TopicInfo info = topic.Register(compaction::TopicConfig{});
  compaction::Producer<Greeting> producer = topic.RegisterProducer();
  compaction::KeyHandle<Greeting> key = topic.Key("hello");
  client.InTransaction([&](compaction::Tx& tx) {
    std::optional<compaction::StoredMessage<Greeting>> head =
        key.LockCompactionHead(tx);
    compaction::ProduceOptions produce{"hello",
                                       compaction::CompactionOptions{}};
    producer.ProduceInTx(tx, Greeting{head ? head->message.text + "!" : "hi"},
                         produce);
  });
  compaction::TopicStats stats = topic.Stats();
  compaction::Janitor janitor(client);
  compaction::SweepResult swept =
      janitor.SweepHeadless(info.name, compaction::SweepOptions{});
  std::cout << key.CompactionHead()->message.text
            << " headless=" << stats.headless_rows << " swept=" << swept.deleted
            << "\n";
  topic.Destroy();
  return 0;
}
