#include "daemon/systemd_notify.hpp"

#include <cstdlib>

#ifdef COMPACTIOND_HAVE_SYSTEMD
#include <systemd/sd-daemon.h>
#endif

namespace compactiond::systemd {
namespace {

void Send([[maybe_unused]] const std::string& state) {
#ifdef COMPACTIOND_HAVE_SYSTEMD
  // unset_environment = 0: a reload may notify again.
  sd_notify(0, state.c_str());
#endif
}

}  // namespace

void NotifyReady() { Send("READY=1"); }
void NotifyStopping() { Send("STOPPING=1"); }
void NotifyStatus(const std::string& status) { Send("STATUS=" + status); }
void NotifyWatchdog() { Send("WATCHDOG=1"); }

std::optional<Millis> WatchdogPingInterval() {
#ifdef COMPACTIOND_HAVE_SYSTEMD
  uint64_t usec = 0;
  if (sd_watchdog_enabled(0, &usec) > 0 && usec > 0) {
    return Millis(static_cast<Millis::rep>(usec / 2000));
  }
#endif
  return std::nullopt;
}

bool UnderSystemd() {
#ifdef COMPACTIOND_HAVE_SYSTEMD
  // Built with libsystemd is not enough: sd_notify only reaches systemd
  // when the service manager handed us its socket (Type=notify).
  const char* socket = std::getenv("NOTIFY_SOCKET");
  return socket != nullptr && *socket != '\0';
#else
  return false;
#endif
}

}  // namespace compactiond::systemd
