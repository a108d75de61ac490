// topic tail TOPIC [--from-start] [--heads-only] [--json]: prints the
// topic's messages as their transactions commit, until SIGINT or SIGTERM.
// Keeps no position (compaction::TopicTail): a second tail, or the next
// one, starts over.
#include <signal.h>

#include <atomic>
#include <chrono>
#include <compaction/compaction.hpp>
#include <compaction/tail.hpp>
#include <iostream>
#include <nlohmann/json.hpp>
#include <thread>

#include "daemon/cli/cli.hpp"
#include "daemon/cli/commands.hpp"
#include "daemon/cli/common.hpp"

namespace compactiond::cli {
namespace {

// How long an idle tail waits between reads: a commit shows within about
// this, and an idle tail costs the server a few index probes a second per
// partition.
constexpr std::chrono::milliseconds kIdleWait{50};

std::atomic<bool> g_stop{false};

void OnSignal(int) { g_stop = true; }

// SIGINT and SIGTERM end the loop between reads; a closed stdout (a pipe
// to `head`) ends it as a failed write instead of killing the process.
void HandleSignals() {
  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);
}

double UnixSeconds(std::chrono::system_clock::time_point t) {
  return std::chrono::duration<double>(t.time_since_epoch()).count();
}

void PrintJson(const compaction::Delivery<compaction::RawMessage>& d) {
  const nlohmann::json line = {
      {"id", d.id},
      {"key", d.message_key},
      {"schema_version", d.schema_version},
      {"created_at", UnixSeconds(d.created_at)},
      {"head", d.head},
      {"tombstone", !d.message.has_value()},
      {"payload", d.message ? d.message->payload : nlohmann::json(nullptr)}};
  // Invalid UTF-8 in a key becomes U+FFFD rather than an exception.
  std::cout << line.dump(-1, ' ', false,
                         nlohmann::json::error_handler_t::replace)
            << "\n";
}

void PrintText(const compaction::Delivery<compaction::RawMessage>& d) {
  std::cout << "id=" << d.id << " key=" << Printable(d.message_key)
            << " schema_version=" << d.schema_version
            << " head=" << (d.head ? "true" : "false") << " payload=";
  if (d.message) {
    std::cout << Printable(d.message->payload.dump(
        -1, ' ', false, nlohmann::json::error_handler_t::replace));
  } else {
    std::cout << "(tombstone)";
  }
  std::cout << "\n";
}

}  // namespace

int TopicTail(const Settings& s, const std::string& topic, bool from_start,
              bool heads_only, bool json) {
  HandleSignals();
  compaction::Client client = Connect(s);
  compaction::TailOptions options;
  options.from_start = from_start;
  options.heads_only = heads_only;
  compaction::TopicTail tail(client, topic, options);
  bool announced = false;
  while (!g_stop) {
    const auto batch = tail.Next();
    if (!announced) {
      // After the first read: what commits from here on is printed.
      std::cerr << "compactiond: tailing topic '" << Printable(topic)
                << "' (SIGINT or SIGTERM stops)" << std::endl;
      announced = true;
    }
    for (const auto& d : batch) json ? PrintJson(d) : PrintText(d);
    std::cout.flush();
    if (!std::cout) return kExitOk;  // the reader went away
    if (batch.empty()) std::this_thread::sleep_for(kIdleWait);
  }
  return kExitOk;
}

}  // namespace compactiond::cli
