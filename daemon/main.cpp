// compactiond: sweeps expired headless compaction-head rows and exports
// Prometheus metrics. All logic lives in compactiond_core (daemon/cli/cli.hpp).
#include <string>
#include <vector>

#include "daemon/cli/cli.hpp"

int main(int argc, char** argv) {
  return compactiond::RunCommandLine(
      std::vector<std::string>(argv + 1, argv + argc));
}
