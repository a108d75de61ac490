#include "pg/cancel.hpp"

#include <libpq-fe.h>

namespace compaction::pg {

CancelHandle::CancelHandle(pg_conn* conn) : cancel_(PQgetCancel(conn)) {}

void CancelHandle::Free::operator()(pg_cancel* c) const noexcept {
  PQfreeCancel(c);
}

void CancelHandle::Send() const noexcept {
  if (!cancel_) return;
  char error[256];
  PQcancel(cancel_.get(), error, sizeof error);
}

}  // namespace compaction::pg
