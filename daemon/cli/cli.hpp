// The command line: parses options, then runs one subcommand of the
// command table (cli/table.hpp; --help lists them), or answers
// --check-config, --print-config, --help or --version.
//
// Exit codes: 0 success; 1 runtime failure (database unreachable for a
// one-shot command, a topic's sweep failed, the listen address is taken);
// 2 usage or configuration error (the message names the key).
//
// Thread safety: call once from main().
#pragma once

#include <string>
#include <vector>

namespace compactiond {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;

int RunCommandLine(const std::vector<std::string>& args);

}  // namespace compactiond
