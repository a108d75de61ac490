// consumer list [--json], consumer reset TOPIC NAME --to-start|--to-end and
// consumer drop TOPIC NAME
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

// "5" or ">=10000" when a partition reached the count's limit.
std::string LagText(const compaction::ConsumerLag& c) {
  return (c.lag_messages_capped ? ">=" : "") + std::to_string(c.lag_messages);
}

std::runtime_error NoSuchConsumer(const std::string& topic,
                                  const std::string& name) {
  return std::runtime_error("topic '" + Printable(topic) +
                            "' has no consumer '" + Printable(name) + "'");
}

}  // namespace

int ConsumerList(const Settings& s, bool json) {
  compaction::Client client = Connect(s);
  compaction::StatsOptions options;
  options.exact_count_limit = s.stats_exact_count_limit;
  const auto topics = client.ListTopicStats(options);
  for (const auto& t : topics) {
    if (!t.stats.consumers_error.empty()) {
      throw std::runtime_error(t.stats.consumers_error);
    }
  }
  if (json) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& t : topics) {
      for (const auto& c : t.stats.consumers) {
        out.push_back({{"topic", t.info.name},
                       {"consumer", c.consumer},
                       {"partitions", c.partitions},
                       {"lag_messages", c.lag_messages},
                       {"lag_messages_capped", c.lag_messages_capped},
                       {"lag_seconds", Seconds(c.lag)},
                       {"last_poll_at", Timestamp(c.last_poll_at)},
                       {"inactive", c.inactive}});
      }
    }
    std::cout << out.dump(2) << "\n";
    return kExitOk;
  }
  std::cout << std::left << std::setw(24) << "TOPIC" << std::setw(24)
            << "CONSUMER" << std::setw(12) << "PARTITIONS" << std::setw(12)
            << "LAG" << std::setw(12) << "LAG_AGE" << std::setw(16)
            << "LAST_POLL_AGO"
            << "INACTIVE\n";
  const auto now = std::chrono::system_clock::now();
  for (const auto& t : topics) {
    for (const auto& c : t.stats.consumers) {
      const std::string ago =
          c.last_poll_at ? FormatDuration(std::chrono::duration_cast<Millis>(
                               now - *c.last_poll_at))
                         : "-";
      std::cout << std::left << std::setw(24) << Printable(t.info.name)
                << std::setw(24) << Printable(c.consumer) << std::setw(12)
                << c.partitions << std::setw(12) << LagText(c) << std::setw(12)
                << FormatDuration(c.lag) << std::setw(16) << ago
                << (c.inactive ? "yes" : "no") << "\n";
    }
  }
  return kExitOk;
}

int ConsumerReset(const Settings& s, const std::string& topic,
                  const std::string& name, bool to_end) {
  compaction::Client client = Connect(s);
  const int n = client.ResetConsumer(topic, name, to_end);
  if (n == 0) throw NoSuchConsumer(topic, name);
  std::cout << "reset topic=" << Printable(topic)
            << " consumer=" << Printable(name)
            << " to=" << (to_end ? "end" : "start") << " partitions=" << n
            << "\n";
  return kExitOk;
}

int ConsumerDrop(const Settings& s, const std::string& topic,
                 const std::string& name) {
  compaction::Client client = Connect(s);
  const int n = AsTableOwner("consumer drop",
                             [&] { return client.DropConsumer(topic, name); });
  if (n == 0) throw NoSuchConsumer(topic, name);
  std::cout << "dropped topic=" << Printable(topic)
            << " consumer=" << Printable(name) << " partitions=" << n << "\n";
  return kExitOk;
}

}  // namespace compactiond::cli
