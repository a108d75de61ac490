// What a failed connection attempt becomes: AuthenticationFailed when the
// server refused the role, ConnectionLost otherwise (down, unreachable,
// too many connections: worth a retry).
#pragma once

struct pg_conn;

namespace compaction::pg {

// Throws for `conn`, whose attempt failed (CONNECTION_BAD or null).
[[noreturn]] void ThrowConnectFailure(const char* operation, pg_conn* conn);

}  // namespace compaction::pg
