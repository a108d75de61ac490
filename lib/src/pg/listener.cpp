// TopicEventListener: the LISTEN connection, on the pg layer's RAII types.
#include <libpq-fe.h>
#include <poll.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

#include "compaction/errors.hpp"
#include "compaction/topic_events.hpp"
#include "pg/connect_error.hpp"
#include "pg/connection.hpp"

namespace compaction {
namespace {

constexpr const char* kOp = "TopicEventListener";

// Waits up to `slice` for `events` on the connection's socket; >0 ready,
// 0 not yet (or interrupted), <0 failed.
int PollSocket(PGconn* conn, short events, std::chrono::milliseconds slice) {
  pollfd p{PQsocket(conn), events, 0};
  const int n = ::poll(&p, 1, static_cast<int>(slice.count()));
  return (n < 0 && errno == EINTR) ? 0 : n;
}

[[noreturn]] void Lost(PGconn* conn, const std::string& what) {
  throw ConnectionLost(kOp, what + ": " + pg::TrimmedErrorMessage(conn));
}

}  // namespace

struct TopicEventListener::Impl {
  pg::ConnPtr conn;
  PostgresPollingStatusType polling = PGRES_POLLING_WRITING;
  bool listening = false;
  NoticeHandler notices;  // here, so its address is stable across moves
};

TopicEventListener::TopicEventListener(
    const std::map<std::string, std::string>& params, NoticeHandler notices)
    : impl_(std::make_unique<Impl>()) {
  impl_->notices = std::move(notices);
  pg::ConnParams all = pg::ForConnection(params, {});
  // The database's own encoding: a NOTIFY payload the server cannot
  // convert to the client's (any byte goes into a SQL_ASCII database) ends
  // the session with a FATAL error, while the payload parser refuses
  // invalid UTF-8 on its own (daemon.hostile_notify).
  all.erase("client_encoding");
  const pg::ParamArrays arrays(all);
  // Non-blocking, so that no call waits longer than its slice.
  impl_->conn.reset(PQconnectStartParams(arrays.keywords.data(),
                                         arrays.values.data(),
                                         /*expand_dbname=*/0));
  pg::RouteNotices(impl_->conn.get(), &impl_->notices);
  if (!impl_->conn || PQstatus(impl_->conn.get()) == CONNECTION_BAD) {
    Lost(impl_->conn.get(), "cannot connect");
  }
}

TopicEventListener::~TopicEventListener() = default;
TopicEventListener::TopicEventListener(TopicEventListener&&) noexcept = default;
TopicEventListener& TopicEventListener::operator=(
    TopicEventListener&&) noexcept = default;

bool TopicEventListener::Connect(std::chrono::milliseconds slice) {
  PGconn* conn = impl_->conn.get();
  if (impl_->listening) return true;
  if (impl_->polling != PGRES_POLLING_OK) {
    const int n = PollSocket(
        conn, impl_->polling == PGRES_POLLING_READING ? POLLIN : POLLOUT,
        slice);
    if (n < 0) Lost(conn, "cannot connect");
    if (n == 0) return false;
    impl_->polling = PQconnectPoll(conn);
    if (impl_->polling == PGRES_POLLING_FAILED) {
      pg::ThrowConnectFailure(kOp, conn);
    }
    if (impl_->polling != PGRES_POLLING_OK) return false;
  }
  // The channel is ours, a constant: no quoting needed. The backend's pid
  // comes in the same transaction, so from the backend that listens.
  pg::Result listen(PQexec(conn, (std::string("LISTEN ") + kTopicEventChannel +
                                  "; SELECT pg_catalog.pg_backend_pid()")
                                     .c_str()));
  if (PQresultStatus(listen.get()) != PGRES_TUPLES_OK) {
    if (PQstatus(conn) != CONNECTION_OK) Lost(conn, "LISTEN failed");
    // A live connection that refuses LISTEN (a pooler's rule, say) will
    // refuse it again.
    throw InvalidArgument(kOp,
                          "LISTEN refused: " + pg::TrimmedErrorMessage(conn));
  }
  // A transaction pooler (PgBouncer in transaction mode) accepts LISTEN
  // and then hands the server connection that listens to other clients, so
  // nothing would ever arrive. Its clients see a backend pid of its own
  // making, not the server's.
  if (listen.Int64(0, 0) != PQbackendPID(conn)) {
    throw InvalidArgument(kOp,
                          "LISTEN cannot work on this connection: a connection "
                          "pooler sits between it and the server (the session "
                          "reports another backend pid than the server's)");
  }
  impl_->listening = true;
  return true;
}

std::vector<TopicEventListener::Notification> TopicEventListener::Wait(
    std::chrono::milliseconds slice) {
  PGconn* conn = impl_->conn.get();
  std::vector<Notification> out;
  const int n = PollSocket(conn, POLLIN, slice);
  if (n == 0) return out;
  if (n < 0 || PQconsumeInput(conn) == 0) Lost(conn, "connection lost");
  while (PGnotify* note = PQnotifies(conn)) {
    std::unique_ptr<PGnotify, decltype(&PQfreemem)> guard(note, &PQfreemem);
    // Only our channel is listened to; a payload is untrusted all the same.
    Notification parsed;
    parsed.payload_bytes = std::strlen(note->extra);
    parsed.sender_pid = note->be_pid;
    parsed.event = ParseTopicEvent(note->extra, &parsed.why);
    out.push_back(std::move(parsed));
  }
  return out;
}

}  // namespace compaction
