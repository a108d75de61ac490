// Shared set-up for the scenario programs: each runs against the database
// named by the PG* variables in its own schema (dropped at the end unless
// COMPACTION_KEEP_SCHEMA is set) and prints what it did.
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <string>

#include "compaction/compaction.hpp"

namespace scenario {

struct Account {
  static constexpr int kSchemaVersion = 1;
  std::string owner;
  std::int64_t balance = 0;
};
inline void to_json(nlohmann::json& j, const Account& a) {
  j = {{"owner", a.owner}, {"balance", a.balance}};
}
inline void from_json(const nlohmann::json& j, Account& a) {
  j.at("owner").get_to(a.owner);
  j.at("balance").get_to(a.balance);
}

// Connects with a schema of its own and installs the baseline.
inline compaction::Client Open(const std::string& name) {
  compaction::ClientOptions options;
  options.schema = "scenario_" + name + "_" + std::to_string(getpid());
  options.pool_size = 8;
  // test/pooler/with_pooler.sh: through PgBouncer in transaction mode.
  const char* pooler = std::getenv("COMPACTION_POOLER_CONNINFO");
  options.prepared_statements = pooler == nullptr;
  auto client = compaction::Client::Connect(pooler ? pooler : "", options);
  client.InstallSchema();
  std::cout << "[" << name << "] schema " << options.schema << " installed\n";
  return client;
}

// Drops the scenario's schema (all its topics) unless asked to keep it.
inline void Close(compaction::Client& client) {
  if (std::getenv("COMPACTION_KEEP_SCHEMA") != nullptr) return;
  for (const auto& topic : client.ListTopics()) {
    client.Topic<compaction::RawMessage>(topic.name).Destroy();
  }
}

inline int Fail(const std::string& what) {
  std::cerr << "FAILED: " << what << "\n";
  return 1;
}

inline compaction::ProduceOptions Compacted(std::string key,
                                            std::int64_t rank = 0) {
  return compaction::ProduceOptions{std::move(key),
                                    compaction::CompactionOptions{rank}};
}

}  // namespace scenario
