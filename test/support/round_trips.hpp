#pragma once
// Counting a client's round trips to the server, for tests that prove a
// statement shape costs one (lock_test, consumer_cost_test).

#include <libpq-fe.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace testing {

// Round trips `body` makes on `conn`: the ReadyForQuery messages the
// server sends, one per simple query or per pipeline/extended-protocol
// sync, traced by libpq itself.
template <class F>
int RoundTrips(PGconn* conn, F&& body) {
  char* buffer = nullptr;
  std::size_t size = 0;
  FILE* trace = open_memstream(&buffer, &size);
  PQtrace(conn, trace);
  PQsetTraceFlags(conn, PQTRACE_SUPPRESS_TIMESTAMPS);
  body();
  PQuntrace(conn);
  std::fclose(trace);
  const std::string text(buffer, size);
  std::free(buffer);
  int count = 0;
  for (std::size_t at = text.find("\tReadyForQuery"); at != std::string::npos;
       at = text.find("\tReadyForQuery", at + 1)) {
    ++count;
  }
  return count;
}

}  // namespace testing
