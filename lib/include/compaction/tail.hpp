// TopicTail: follows a topic without a consumer, for tools (`compactiond
// topic tail`, the kcat -C of this system). It reads as a Consumer reads
// (consume_read.cpp: what a newer snapshot sees that the last one did not,
// so a late commit is never missed and nothing is repeated), but keeps its
// position per partition in this object only: nothing is written, a role
// that may read the topic may tail it, and a new TopicTail starts over.
//
// Lifetime: keeps the client's connection pool alive. Thread safety: one
// thread at a time.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "compaction/client.hpp"
#include "compaction/consumer.hpp"
#include "compaction/export.hpp"
#include "compaction/message.hpp"

namespace compaction {

struct TailOptions {
  // false: only what commits after the first Next() started; true: the
  // whole log first.
  bool from_start = false;
  // Only deliveries that are their key's head when read.
  bool heads_only = false;
  int batch_size = 500;  // most deliveries one Next() returns (1..10,000)
};

class COMPACTION_EXPORT TopicTail {
 public:
  // No I/O; throws InvalidArgument for a bad topic name or batch size.
  TopicTail(Client& client, std::string topic, TailOptions options = {});
  ~TopicTail();
  TopicTail(TopicTail&&) noexcept;
  TopicTail& operator=(TopicTail&&) noexcept;

  // The next deliveries of one partition (each partition in turn), in
  // Consumer::Poll's order (window by window, by the writing transaction's
  // id, then the message id); empty when no
  // partition has anything new. One statement asks every partition first,
  // so an idle Next() is one round trip whatever the partitions. Throws
  // TopicNotFound, DatabaseError.
  std::vector<Delivery<RawMessage>> Next();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace compaction
