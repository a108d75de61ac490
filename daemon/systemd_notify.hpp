// systemd service notifications (sd_notify). Without libsystemd at build
// time, or without NOTIFY_SOCKET at run time, every call is a no-op.
// Thread safety: every function may be called from any thread.
#pragma once

#include <optional>
#include <string>

#include "daemon/config.hpp"

namespace compactiond::systemd {

void NotifyReady();
void NotifyStopping();
void NotifyStatus(const std::string& status);
void NotifyWatchdog();
// Half the WATCHDOG_USEC systemd asks for, or nullopt when no watchdog.
std::optional<Millis> WatchdogPingInterval();
// Whether notifications reach a service manager: built with libsystemd and
// started with NOTIFY_SOCKET (what the log's systemd=true reports).
bool UnderSystemd();

}  // namespace compactiond::systemd
