// What single produces and batches share.
#pragma once

#include <cstddef>
#include <initializer_list>
#include <string>

#include "compaction/detail/entry_points.hpp"
#include "compaction/message.hpp"
#include "compaction/tx.hpp"
#include "core.hpp"

namespace compaction::detail {

// InvalidArgument (under `operation`) unless `message` with `options` is a
// message Produce may send: a tombstone needs compaction, compaction needs
// a key, the key and the schema version must be valid.
void ValidateProduce(const char* operation, const Outgoing& message,
                     const ProduceOptions& options);

// The SQL expression of the partition of the key `key_sql` (an SQL text
// expression) in a topic of `partitions` partitions: the rule of
// sql/topic_v1.sql (a stable hash of the key, non-negative without abs(),
// which fails on the smallest bigint).
std::string PartitionOfKeySql(const std::string& key_sql, int partitions);

// The statements of a produce to `topic` (built once per topic:
// ClientCore::Sql): a plain insert, keyed or not, and the compacted one.
std::string PlainInsertSql(const ClientCore& core, const TopicInfo& topic,
                           bool keyed);
std::string CompactedInsertSql(const ClientCore& core, std::int64_t id);
// The call of the topic's produce_batch_<id> (produce_batch.cpp), built
// once per topic as well: its five parameters are the batch's arrays.
std::string ProduceBatchSql(const ClientCore& core, std::int64_t id);

// InvalidArgument (under `operation`) unless parameters of these lengths
// fit one protocol message: PostgreSQL closes the connection, without an
// error, on a message of 1 GB or more (the Bind that carries them all),
// which the caller would meet as ConnectionLost or CommitOutcomeUnknown
// for a write that cannot have happened.
void CheckFitsOneMessage(const char* operation,
                         std::initializer_list<std::size_t> parameter_bytes);

// ProduceInTx, then Tx::Commit, in one round trip when the transaction
// already touched `topic` (Update's last step): the produce, a flush
// request and COMMIT. A COMMIT whose connection broke is resolved as
// Tx::Commit resolves it, by looking for the message.
ProduceResult ProduceAndCommit(ClientCore& core, Tx& tx,
                               const std::string& topic,
                               const Outgoing& message,
                               const ProduceOptions& options);

}  // namespace compaction::detail
