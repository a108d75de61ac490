#include "daemon/config_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "daemon/config.hpp"

namespace compactiond {
namespace {

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

}  // namespace

std::string ReadConfigFile(const std::string& path) {
  const std::string what = "config: cannot read config file '" + path + "'";
  Fd fd(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY));
  if (fd.get() < 0) throw ConfigError(what + ": " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) {
    throw ConfigError(what + ": " + std::strerror(errno));
  }
  if (!S_ISREG(st.st_mode)) {
    // /dev/null (through any link) reads as an empty file, which is what
    // `--config /dev/null` means: no file settings.
    struct stat null {};
    if (S_ISCHR(st.st_mode) && ::stat("/dev/null", &null) == 0 &&
        S_ISCHR(null.st_mode) && st.st_rdev == null.st_rdev) {
      return "";
    }
    throw ConfigError(what + ": not a regular file");
  }
  const std::string too_large = what + ": larger than " +
                                std::to_string(kMaxConfigFileBytes) +
                                " bytes (1 MiB)";
  if (static_cast<std::size_t>(st.st_size) > kMaxConfigFileBytes) {
    throw ConfigError(too_large);
  }
  // Read to one byte past the bound: the file may have grown since fstat.
  std::string text(kMaxConfigFileBytes + 1, '\0');
  std::size_t used = 0;
  while (used < text.size()) {
    const ssize_t n = ::read(fd.get(), text.data() + used, text.size() - used);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw ConfigError(what + ": " + std::strerror(errno));
    if (n == 0) break;
    used += static_cast<std::size_t>(n);
  }
  if (used > kMaxConfigFileBytes) throw ConfigError(too_large);
  text.resize(used);
  return text;
}

}  // namespace compactiond
