// Consumer<M>: follows a topic, durably. From TopicHandle<M>::Consumer(name,
// options); creating one does no I/O.
//
// A consumer's progress lives in the database, one position per partition
// of the topic, and moves only in the transaction of the Poll that read the
// deliveries: commit it and they are consumed, roll it back and the next
// Poll returns them again. Every committed message is delivered, whatever
// order its writers committed in (a message whose transaction commits after
// later-numbered ones were delivered comes with the next Poll after its
// commit). Instances of one consumer (same topic and name, any process)
// share the partitions: each Poll works one partition no other instance
// holds at that moment. The consumer's first Poll creates its positions in
// its transaction; another instance's first Poll waits for that to commit.
//
// Lifetime: keeps the client's connection pool alive; cheap to copy.
// Thread safety: Poll follows the thread rules of the Tx it is given; Wait
// may be called from any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "compaction/export.hpp"
#include "compaction/message.hpp"
#include "compaction/tx.hpp"

namespace compaction {

struct ConsumerOptions {
  int batch_size = 500;     // most deliveries one Poll returns (1..10,000)
  bool heads_only = false;  // deliver only deliveries whose `head` is true
                            // (the compacted view)
};

inline constexpr int kMaxConsumerBatch = 10000;

template <class M>
struct Delivery {
  std::int64_t id = 0;
  std::string message_key;  // empty for a message produced without a key
  int schema_version = 0;
  std::optional<std::int64_t> compaction_rank;
  std::chrono::system_clock::time_point created_at;
  std::optional<M> message;  // empty for a tombstone (for RawMessage too)
  // A keyed compacted message that was its key's head when this Poll read
  // it. Applying, in delivery order, the deliveries whose head is true
  // leaves every key at its current head (a value, or none after a
  // tombstone).
  bool head = false;
};

namespace detail {

class ClientCore;

struct RawDelivery {
  RawStored stored;
  bool head = false;
};

// What one Poll read, and the position that consumes it. The position is
// written only by PollAdvance, after the template decoded every delivery:
// one it cannot decode throws with the position where it was.
struct PolledBatch {
  std::vector<RawDelivery> deliveries;
  std::int64_t topic_id = 0;
  int partition = -1;  // -1: every partition is held by other instances
  std::string done_snapshot;
  std::optional<std::string> read_snapshot;
  std::optional<std::string> cursor_xid;
  std::optional<std::int64_t> cursor_id;
};

COMPACTION_EXPORT void ValidateConsumer(const std::string& topic,
                                        const std::string& consumer,
                                        const ConsumerOptions& options);
COMPACTION_EXPORT PolledBatch PollRead(ClientCore& core, Tx& tx,
                                       const std::string& topic,
                                       const std::string& consumer,
                                       const ConsumerOptions& options);
COMPACTION_EXPORT void PollAdvance(ClientCore& core, Tx& tx,
                                   const std::string& consumer,
                                   const PolledBatch& batch);
COMPACTION_EXPORT bool WaitForMessages(ClientCore& core,
                                       const std::string& topic,
                                       const std::string& consumer,
                                       std::chrono::milliseconds timeout);

}  // namespace detail

template <Message M>
class TopicHandle;

template <Message M>
class Consumer {
 public:
  // In the caller's transaction (READ COMMITTED; InvalidArgument otherwise):
  // takes this consumer's position of one partition (a row lock, skipping
  // partitions other instances hold), returns the next deliveries after it
  // (at most batch_size) and moves the position past them in that same
  // transaction. Order: what became visible since the last window, by the
  // writing transaction's id, then the message id. A transaction takes its
  // id at its first write, not at commit, so two concurrent writers' messages
  // of one key can come in another order than their message ids: order a
  // key's values by `head` (compacted) or by message id.
  // Commit: they are consumed. Roll back: the next Poll returns them again.
  // The first Poll of a consumer creates its positions at the start of the
  // topic. Empty: nothing new in the partition it worked, or every
  // partition is held by another instance. A delivery M cannot decode
  // (another schema version, a payload from_json refuses) throws
  // MessageSchemaVersionMismatch or MessageDecodeError naming the message
  // id, and the position stays where it was; RawMessage decodes everything.
  std::vector<Delivery<M>> Poll(Tx& tx) {
    detail::PolledBatch batch =
        detail::PollRead(*core_, tx, topic_, name_, options_);
    std::vector<Delivery<M>> out;
    out.reserve(batch.deliveries.size());
    for (detail::RawDelivery& raw : batch.deliveries) {
      out.push_back(Decode(std::move(raw)));
    }
    detail::PollAdvance(*core_, tx, name_, batch);
    return out;
  }

  // Blocks until a Poll may find something new (a probe of the consumer's
  // positions against the log every few tens of milliseconds; nothing on
  // the produce path), or the timeout. True when there is something new.
  bool Wait(std::chrono::milliseconds timeout) {
    return detail::WaitForMessages(*core_, topic_, name_, timeout);
  }

  const std::string& name() const { return name_; }
  const std::string& topic_name() const { return topic_; }
  const ConsumerOptions& options() const { return options_; }

 private:
  friend class TopicHandle<M>;

  Consumer(std::shared_ptr<detail::ClientCore> core, std::string topic,
           std::string name, ConsumerOptions options)
      : core_(std::move(core)),
        topic_(std::move(topic)),
        name_(std::move(name)),
        options_(options) {
    detail::ValidateConsumer(topic_, name_, options_);
  }

  static Delivery<M> Decode(detail::RawDelivery raw) {
    Delivery<M> d;
    d.id = raw.stored.id;
    d.schema_version = raw.stored.schema_version;
    d.compaction_rank = raw.stored.compaction_rank;
    d.created_at = raw.stored.created_at;
    d.head = raw.head;
    // A tombstone has no payload to decode, whatever its schema version.
    if (!raw.stored.message.tombstone) {
      d.message = detail::Codec<M>::Decode("Poll", raw.stored);
    }
    d.message_key = std::move(raw.stored.message_key);
    return d;
  }

  std::shared_ptr<detail::ClientCore> core_;
  std::string topic_;
  std::string name_;
  ConsumerOptions options_;
};

}  // namespace compaction
