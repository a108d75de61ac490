// consume_once: consumes a topic's backlog with Consumer::Poll (batch 500,
// each Poll its own transaction) until a round over every partition finds
// nothing, and prints how many messages and the client's CPU. The consume
// workload of test/bench/citus_compare.sh, which samples the servers' CPU
// around it.
//
//   consume_once TOPIC CONSUMER PARTITIONS     (PG* environment)
#include <sys/resource.h>

#include <compaction/client.hpp>
#include <iostream>
#include <string>

namespace {

double ClientCpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::cerr << "usage: consume_once TOPIC CONSUMER PARTITIONS\n";
    return 2;
  }
  compaction::Client client = compaction::Client::Connect("");
  auto consumer = client.Topic<compaction::RawMessage>(argv[1]).Consumer(
      argv[2], compaction::ConsumerOptions{500, false});
  const int partitions = std::stoi(argv[3]);
  const double cpu = ClientCpuSeconds();
  long messages = 0;
  int empty = 0;
  while (empty < partitions + 1) {
    const auto batch = client.InTransaction(
        [&](compaction::Tx& tx) { return consumer.Poll(tx); });
    messages += static_cast<long>(batch.size());
    empty = batch.empty() ? empty + 1 : 0;
  }
  std::cout << "messages=" << messages << " client_us_per_msg="
            << static_cast<long>((ClientCpuSeconds() - cpu) * 1e6 /
                                 (messages ? messages : 1))
            << "\n";
  return 0;
}
