#pragma once
// What the coordinator sent to the workers, as citus.log_remote_commands
// reports it in NOTICEs: collected and searched by the Citus tests.

#include <compaction/client.hpp>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace testing {

// The commands the coordinator sent to the workers, from the NOTICEs
// citus.log_remote_commands raises on the library's own connections.
struct RemoteCommands {
  std::mutex mutex;
  std::vector<std::string> issued;
  compaction::NoticeHandler Handler() {
    return [this](const compaction::Notice& n) {
      if (n.message.rfind("issuing ", 0) != 0) return;
      std::lock_guard lock(mutex);
      issued.push_back(n.message);
    };
  }
  std::vector<std::string> Take() {
    std::lock_guard lock(mutex);
    return std::exchange(issued, {});
  }
};

// The logged commands, each cut to 300 bytes, for a failure's message.
inline std::string Join(const std::vector<std::string>& lines) {
  std::string out;
  for (const std::string& line : lines) out += line.substr(0, 300) + "\n";
  return out;
}

// How many logged commands contain `text`.
inline int Count(const std::vector<std::string>& lines,
                 const std::string& text) {
  int n = 0;
  for (const std::string& line : lines) {
    if (line.find(text) != std::string::npos) ++n;
  }
  return n;
}

}  // namespace testing
