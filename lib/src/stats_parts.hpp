// Parts of the topic stats shared by lib/src/stats.cpp (the headless rows
// and the janitor) and lib/src/stats_log.cpp (the log, its cleaner and the
// count of planted timestamps).
#pragma once

#include <optional>
#include <span>
#include <string>

#include "compaction/errors.hpp"
#include "compaction/stats.hpp"
#include "core.hpp"
#include "pg/connection.hpp"

namespace compaction::detail {

// Stored timestamps no reader can use: the server's columns hold neither
// -infinity nor a time more than an hour ahead of its clock (a concurrent
// transaction's is at most seconds ahead), so such rows were planted by
// hand. Readers skip them (subtracting an infinity fails the statement with
// 22008) and stats count them (TopicStats::invalid_timestamp_rows).
inline constexpr const char* kBadBefore = "'-infinity'::timestamptz";
inline constexpr const char* kBadAfter = "pg_catalog.now() + interval '1 hour'";

// A nullable timestamp column read as ShortMicros/Micros.
std::optional<JanitorState::TimePoint> OptTime(const pg::Result& r, int row,
                                               int col);

// Errors that concern one topic's own tables or rows rather than the
// connection or the whole schema: undefined table or column, no privilege
// on them (class 42, "syntax error or access rule violation", of a
// statement that is ours), or a stored value the statement cannot handle
// (class 22, "data exception": a row planted by hand).
bool IsTopicFault(const DatabaseError& e);

// TopicStats::invalid_timestamp_rows of `topics`. `if_headless`: only the
// topics whose headless rows are counted already and not 0 (a listing);
// otherwise every topic.
void CountInvalid(const char* operation, ClientCore& core, pg::Session s,
                  std::span<TopicOverview> topics, bool if_headless);

// Fills in the log's figures of `topics` (those without an error). With
// `isolate` (a listing) a topic whose figures cannot be read gets its
// error; without, the error is thrown.
void AddCleanerStats(const char* operation, ClientCore& core, pg::Session s,
                     std::span<TopicOverview> topics, bool isolate);

// TopicStats::consumers of `topics`, one statement for all (the
// consumer_lag function, which the monitor role may run).
void AddConsumerLag(const char* operation, pg::Session s,
                    const ClientCore& core, std::span<TopicOverview> topics,
                    std::int64_t cap);

}  // namespace compaction::detail
