// compactiond: sweeps expired headless compaction-head rows and exports
// Prometheus metrics. All logic lives in compactiond_core (daemon/cli/cli.hpp).
#include <csignal>
#include <string>
#include <vector>

#include "daemon/cli/cli.hpp"

int main(int argc, char** argv) {
  // A closed stdout or stderr pipe (a log shipper that went away, `| head`)
  // must not kill the process: a write then fails with EPIPE, and a log
  // line is dropped (daemon/log.cpp).
  signal(SIGPIPE, SIG_IGN);
  return compactiond::RunCommandLine(
      std::vector<std::string>(argv + 1, argv + argc));
}
