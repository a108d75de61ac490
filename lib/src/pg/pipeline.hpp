// The one implementation of libpq's pipeline protocol (enter, send, sync,
// drain, leave) under ExecPipelined and ExecCommitted.
#pragma once

#include <cstddef>
#include <vector>

#include "pg/exec.hpp"

namespace compaction::pg {

// What came back from a pipeline.
struct PipelineReply {
  bool sent = false;  // every statement and the sync went out
  // One per statement, in order, up to the first that never answered (the
  // connection broke). After a failed one the server skips the rest
  // (PGRES_PIPELINE_ABORTED).
  std::vector<Result> results;
  // The first error between the last statement's result and the sync: an
  // implicit transaction's COMMIT refused (a deferred constraint).
  Result at_sync;
  bool synced = false;  // the sync point came back
  bool left = false;    // the connection is out of pipeline mode
};

// Where no flush request goes.
inline constexpr std::size_t kNoFlush = static_cast<std::size_t>(-1);

// Prepares `statements` (when the session caches statements), sends them
// and a sync in pipeline mode, with a flush request just before statement
// `flush_before` (statements.size(): before the sync) so the server sends
// what came before it at once, reads every result through the sync point
// and leaves pipeline mode. A live connection whose sync point never came
// is out of step with the server (a libpq that skips the sync after an
// error at it, before 15.5): it stays in pipeline mode, so the pool
// discards it. Throws only when preparing fails or pipeline mode cannot
// be entered (nothing sent).
PipelineReply RunPipeline(Session session, const char* operation,
                          const std::vector<StatementRef>& statements,
                          std::size_t flush_before = kNoFlush);

}  // namespace compaction::pg
