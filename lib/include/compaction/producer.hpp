// Producer<M>: appends messages to one topic's log.
//
// Obtained from TopicHandle<M>::RegisterProducer(), which checks the topic
// exists. Produces address the topic by name: a producer that outlived a
// Destroy and Register of its topic works on the new topic; only a topic
// that is really gone is TopicNotFound (and ProduceInTx leaves the caller's
// transaction usable then). Lifetime: keeps the client's connection pool
// alive. Thread safety: Produce may be called from many threads at once;
// ProduceInTx follows the thread rules of the Tx it is given.
#pragma once

#include <atomic>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "compaction/detail/entry_points.hpp"
#include "compaction/detail/produce_batch.hpp"
#include "compaction/message.hpp"
#include "compaction/tx.hpp"

namespace compaction {

template <Message M>
class TopicHandle;

template <Message M>
class Producer {
 public:
  // Appends `message` in its own transaction. With options.compaction set,
  // a message key is required and the key's head moves to this message when
  // it wins, in the same statement: when the key has no head, or when
  // (schema_version, rank, id) of this message is greater than the head's.
  // The message's schema_version must be in 1..kMaxSchemaVersion
  // (InvalidArgument). A connection that breaks while the statement is in
  // flight is CommitOutcomeUnknown: the message may have been stored.
  ProduceResult Produce(const M& message, const ProduceOptions& options = {}) {
    return Count(detail::Produce(*core_, topic_.name, Encode(message), options),
                 options);
  }

  // The same inside the caller's transaction: commits or rolls back with it.
  ProduceResult ProduceInTx(Tx& tx, const M& message,
                            const ProduceOptions& options = {}) {
    return Count(
        detail::ProduceInTx(*core_, tx, topic_.name, Encode(message), options),
        options);
  }

  // Appends a tombstone for `message_key` in its own transaction: a
  // message without a payload that competes for the key's head by the same
  // winner rule (at M's kSchemaVersion and options.rank). Once it is the
  // head, the key has no value: CompactionHead and LockCompactionHead
  // return nullopt, listings skip it. A later produce that wins revives the
  // key; after the topic's tombstone_retention the log cleaner removes the
  // tombstone and the key's row turns headless. Errors as Produce.
  ProduceResult ProduceTombstone(std::string message_key,
                                 CompactionOptions options = {}) requires
      TypedMessage<M> {
    return ProduceTombstoneAt(M::kSchemaVersion, std::move(message_key),
                              options, nullptr);
  }
  ProduceResult ProduceTombstoneInTx(Tx& tx, std::string message_key,
                                     CompactionOptions options = {}) requires
      TypedMessage<M> {
    return ProduceTombstoneAt(M::kSchemaVersion, std::move(message_key),
                              options, &tx);
  }
  // RawMessage has no schema version of its own: the caller names it (a
  // tombstone must rank at or above the key's head to win).
  ProduceResult ProduceTombstone(
      std::string message_key, CompactionOptions options,
      int schema_version) requires std::same_as<M, RawMessage> {
    return ProduceTombstoneAt(schema_version, std::move(message_key), options,
                              nullptr);
  }
  ProduceResult ProduceTombstoneInTx(
      Tx& tx, std::string message_key, CompactionOptions options,
      int schema_version) requires std::same_as<M, RawMessage> {
    return ProduceTombstoneAt(schema_version, std::move(message_key), options,
                              &tx);
  }

  // Produces every message of `batch` in one transaction of its own and
  // one round trip: the outcome of producing them one by one in input
  // order (several versions of one key included), each compacted one by
  // the winner rule of Produce. Results come in input order, ids
  // ascending. The head rows of the batch's compacted keys are taken first,
  // in key order, so concurrent batches over overlapping keys never
  // deadlock each other. An element without a message is a tombstone (see
  // Outgoing). Bad input in any element is InvalidArgument naming its
  // index ("element 3: ..."), as is a batch of more than kMaxBatchSize
  // messages, before anything is written. An empty batch sends nothing.
  // A connection that breaks while the statement is in flight is
  // CommitOutcomeUnknown, as for Produce.
  std::vector<ProduceResult> ProduceBatch(std::span<const Outgoing<M>> batch) {
    return CountBatch(
        detail::ProduceBatch(*core_, nullptr, topic_.name, EncodeBatch(batch)),
        batch);
  }
  // The same inside the caller's transaction: commits or rolls back with
  // it (a batch that fails aborts it, like a failed ProduceInTx).
  std::vector<ProduceResult> ProduceBatchInTx(
      Tx& tx, std::span<const Outgoing<M>> batch) {
    return CountBatch(
        detail::ProduceBatch(*core_, &tx, topic_.name, EncodeBatch(batch)),
        batch);
  }

  // The topic as it was when this producer was registered.
  const TopicInfo& topic() const { return topic_; }

 private:
  friend class TopicHandle<M>;

  Producer(std::shared_ptr<detail::ClientCore> core, TopicInfo topic)
      : core_(std::move(core)), topic_(std::move(topic)) {}

  ProduceResult ProduceTombstoneAt(int schema_version, std::string key,
                                   CompactionOptions compaction, Tx* tx) {
    const detail::Outgoing tombstone{schema_version, std::string(), true};
    ProduceOptions options;
    options.message_key = std::move(key);
    options.compaction = compaction;
    if (tx == nullptr) {
      return Count(detail::Produce(*core_, topic_.name, tombstone, options),
                   options);
    }
    return Count(
        detail::ProduceInTx(*core_, *tx, topic_.name, tombstone, options),
        options);
  }

  static detail::Outgoing Encode(const M& message) {
    return detail::Outgoing{
        detail::Codec<M>::SchemaVersion(message),
        detail::DumpPayload("Produce", detail::Codec<M>::Encode(message))};
  }

  static detail::Outgoing EncodeElement(const Outgoing<M>& element) {
    if (element.message) {
      if constexpr (std::same_as<M, RawMessage>) {
        if (element.message->tombstone) {
          return detail::Outgoing{element.message->schema_version,
                                  std::string(), true};
        }
      }
      return detail::Outgoing{
          detail::Codec<M>::SchemaVersion(*element.message),
          detail::DumpPayload(detail::kProduceBatchOp,
                              detail::Codec<M>::Encode(*element.message))};
    }
    if constexpr (std::same_as<M, RawMessage>) {
      throw InvalidArgument(detail::kProduceBatchOp,
                            "a RawMessage tombstone names its schema "
                            "version: RawMessage{version, nullptr, true}");
    } else {
      return detail::Outgoing{M::kSchemaVersion, std::string(), true};
    }
  }

  static std::vector<detail::BatchElement> EncodeBatch(
      std::span<const Outgoing<M>> batch) {
    detail::CheckBatchSize(batch.size());
    std::vector<detail::BatchElement> out;
    out.reserve(batch.size());
    for (std::size_t i = 0; i < batch.size(); ++i) {
      try {
        out.push_back(
            detail::BatchElement{EncodeElement(batch[i]), &batch[i].options});
      } catch (const InvalidArgument& e) {
        detail::ThrowAtElement(i, e);
      }
    }
    return out;
  }

  std::vector<ProduceResult> CountBatch(std::vector<ProduceResult> results,
                                        std::span<const Outgoing<M>> batch) {
    for (std::size_t i = 0; i < results.size(); ++i) {
      results[i] = Count(results[i], batch[i].options);
    }
    return results;
  }

  // Fills in not_advanced (see ProduceResult).
  ProduceResult Count(ProduceResult result, const ProduceOptions& options) {
    if (options.compaction && !result.head_advanced) ++*not_advanced_;
    result.not_advanced = *not_advanced_;
    return result;
  }

  std::shared_ptr<detail::ClientCore> core_;
  TopicInfo topic_;
  // Shared by copies of this producer.
  std::shared_ptr<std::atomic<std::int64_t>> not_advanced_ =
      std::make_shared<std::atomic<std::int64_t>>(0);
};

}  // namespace compaction
