// Producer<M>: appends messages to one topic's log.
//
// Obtained from TopicHandle<M>::RegisterProducer(), which resolves the topic
// once. Lifetime: keeps the client's connection pool alive. Thread safety:
// Produce may be called from many threads at once; ProduceInTx follows the
// thread rules of the Tx it is given.
#pragma once

#include <memory>
#include <utility>

#include "compaction/detail/core.hpp"
#include "compaction/message.hpp"
#include "compaction/tx.hpp"

namespace compaction {

template <Message M>
class Producer {
 public:
  Producer(std::shared_ptr<detail::ClientCore> core, TopicInfo topic)
      : core_(std::move(core)), topic_(std::move(topic)) {}

  // Appends `message` in its own transaction. With options.compaction set,
  // a message key is required and the key's head moves to this message when
  // it wins (DESIGN section 3), in the same statement.
  ProduceResult Produce(const M& message, const ProduceOptions& options = {}) {
    return detail::Produce(*core_, topic_, Encode(message), options);
  }

  // The same inside the caller's transaction: commits or rolls back with it.
  ProduceResult ProduceInTx(Tx& tx, const M& message,
                            const ProduceOptions& options = {}) {
    return detail::ProduceInTx(*core_, tx, topic_, Encode(message), options);
  }

  const TopicInfo& topic() const { return topic_; }

 private:
  static detail::Outgoing Encode(const M& message) {
    return detail::Outgoing{
        detail::Codec<M>::SchemaVersion(message),
        detail::DumpPayload("Produce", detail::Codec<M>::Encode(message))};
  }

  std::shared_ptr<detail::ClientCore> core_;
  TopicInfo topic_;
};

}  // namespace compaction
