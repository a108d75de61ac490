// topic list [--json], topic register NAME... and topic destroy NAME
#include <compaction/compaction.hpp>
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "daemon/cli/cli.hpp"
#include "daemon/cli/commands.hpp"
#include "daemon/cli/common.hpp"
#include "daemon/duration.hpp"

namespace compactiond::cli {
namespace {

nlohmann::json TopicJson(const compaction::TopicInfo& t) {
  return {{"id", t.id},
          {"name", t.name},
          {"headless_ttl_seconds", Seconds(t.headless_ttl)},
          {"retention_seconds", RetentionJson(t.retention)},
          {"tombstone_retention_seconds", RetentionJson(t.tombstone_retention)},
          {"partitions", t.partitions}};
}

void PrintTable(const std::vector<compaction::TopicInfo>& topics) {
  std::cout << std::left << std::setw(8) << "ID" << std::setw(32) << "TOPIC"
            << std::setw(10) << "TTL" << std::setw(12) << "RETENTION"
            << "TOMBSTONE_RETENTION\n";
  for (const auto& t : topics) {
    std::cout << std::left << std::setw(8) << t.id << std::setw(32)
              << Printable(t.name) << std::setw(10)
              << FormatDuration(t.headless_ttl) << std::setw(12)
              << RetentionText(t.retention)
              << RetentionText(t.tombstone_retention) << "\n";
  }
}

}  // namespace

int TopicList(const Settings& s, bool json) {
  compaction::Client client = Connect(s);
  auto topics = client.ListTopics();
  if (json) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& t : topics) out.push_back(TopicJson(t));
    std::cout << out.dump(2) << "\n";
    return kExitOk;
  }
  PrintTable(topics);
  return kExitOk;
}

// Several names register one after another on one connection.
int TopicRegister(const Settings& s, const std::vector<std::string>& names,
                  const compaction::TopicConfig& config) {
  compaction::Client client = Connect(s);
  for (const std::string& name : names) {
    compaction::TopicInfo info =
        client.Topic<compaction::RawMessage>(name).Register(config);
    std::cout << "registered topic=" << Printable(info.name)
              << " id=" << info.id
              << " headless_ttl=" << FormatDuration(info.headless_ttl)
              << " retention=" << RetentionText(info.retention)
              << " tombstone_retention="
              << RetentionText(info.tombstone_retention)
              << " partitions=" << info.partitions << "\n";
  }
  return kExitOk;
}

int TopicDestroy(const Settings& s, const std::string& name) {
  compaction::Client client = Connect(s);
  AsTableOwner("topic destroy",
               [&] { client.Topic<compaction::RawMessage>(name).Destroy(); });
  std::cout << "destroyed topic=" << name << "\n";
  return kExitOk;
}

}  // namespace compactiond::cli
