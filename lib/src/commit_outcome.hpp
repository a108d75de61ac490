// What a transaction whose connection broke during COMMIT turned out to be,
// found out on a new connection (doc/poolers-and-failover.md).
//
// Thread safety: a free function; runs on the calling thread and blocks at
// most ClientOptions::commit_check_timeout.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core.hpp"
#include "pg/connection.hpp"
#include "pg/exec.hpp"

namespace compaction::detail {

// Returns normally when the transaction committed: `effect` is on the
// server. Throws ConnectionLost (safe to retry) when it provably did not:
// the new connection reached the same server (same system identifier and
// postmaster start), the old backend is gone from pg_stat_activity (so it
// can no longer commit) and the effect is absent while the topic's
// retention cannot have removed it. Throws CommitOutcomeUnknown otherwise:
// no effect to look for (a lock-only transaction), another server (a
// promoted standby), an unknown old backend (a pooler in between), or no
// answer within the timeout. `old` is the broken connection's identity.
void ResolveBrokenCommit(ClientCore& core, const char* operation,
                         const pg::ServerIdentity* old,
                         const std::optional<WrittenMessage>& effect);

// Whether a statement that commits should get its result back before the
// commit: only when a broken COMMIT will be checked (commit_check_timeout
// above zero) is there anything to look for with it.
pg::ResultFirst ResultBeforeCommit(const ClientCore& core);

}  // namespace compaction::detail
