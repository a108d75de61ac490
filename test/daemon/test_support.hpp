// Helpers the daemon's unit tests share: a scoped environment variable, a
// temporary file, and the ConfigError an invocation raises.
#pragma once

#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "daemon/config.hpp"

namespace compactiond::test {

// Sets an environment variable for one test's scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    ::setenv(name, value, 1);
  }
  ~ScopedEnv() { ::unsetenv(name_); }

 private:
  const char* name_;
};

inline std::string WriteFile(const std::string& text) {
  char path[] = "/tmp/compactiond_test_XXXXXX";
  int fd = ::mkstemp(path);
  REQUIRE(fd >= 0);
  ::close(fd);
  std::ofstream(path) << text;
  return path;
}

// The ConfigError an invocation raises, or "" when it is accepted.
inline std::string ErrorOf(const std::vector<std::string>& args) {
  try {
    ParseInvocation(args);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

}  // namespace compactiond::test
