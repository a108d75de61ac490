// TopicTail: the consumers' batch read (consume_read.cpp) over positions
// kept in memory, one per partition, on autocommit statements of a pooled
// connection (each statement's snapshot is a valid window W there, as in
// READ COMMITTED).
#include "compaction/tail.hpp"

#include "consume_read.hpp"
#include "rows.hpp"
#include "topics.hpp"
#include "validate.hpp"

namespace compaction {

namespace {
constexpr const char* kOp = "TopicTail";
}  // namespace

struct TopicTail::State {
  std::shared_ptr<detail::ClientCore> core;
  std::string topic;
  TailOptions options;
  std::vector<detail::Position> positions;  // per partition; empty: unread
  size_t next = 0;                          // the partition read next
};

TopicTail::TopicTail(Client& client, std::string topic, TailOptions options)
    : state_(std::make_unique<State>()) {
  detail::ValidateTopicName(kOp, topic);
  detail::ValidateLimit(kOp, "batch_size", options.batch_size,
                        kMaxConsumerBatch);
  state_->core = client.core();
  state_->topic = std::move(topic);
  state_->options = options;
}

TopicTail::~TopicTail() = default;
TopicTail::TopicTail(TopicTail&&) noexcept = default;
TopicTail& TopicTail::operator=(TopicTail&&) noexcept = default;

std::vector<Delivery<RawMessage>> TopicTail::Next() {
  State& st = *state_;
  return detail::WithTopic(
      *st.core, kOp, st.topic, [&](pg::Session s, const TopicInfo& topic) {
        if (st.positions.empty()) {
          // From now: every transaction committed before this statement
          // counts as read, as after a consumer reset --to-end.
          std::string start = detail::kStartSnapshot;
          if (!st.options.from_start) {
            pg::Result r = pg::Exec(
                s, kOp, "SELECT pg_catalog.pg_current_snapshot()::text", {});
            start = std::string(pg::Text(r, 0, 0));
          }
          st.positions.assign(static_cast<size_t>(topic.partitions),
                              detail::Position{start, {}, {}, {}});
        }
        std::vector<Delivery<RawMessage>> out;
        for (size_t tried = 0; tried < st.positions.size() && out.empty();
             ++tried) {
          const size_t partition = st.next;
          st.next = (st.next + 1) % st.positions.size();
          for (detail::RawDelivery& raw : detail::ReadBatch(
                   *st.core, s, topic.id, static_cast<int>(partition),
                   st.options.heads_only, st.options.batch_size,
                   st.positions[partition])) {
            Delivery<RawMessage> d;
            d.id = raw.stored.id;
            d.schema_version = raw.stored.schema_version;
            d.compaction_rank = raw.stored.compaction_rank;
            d.created_at = raw.stored.created_at;
            if (!raw.stored.message.tombstone) {
              d.message = detail::Codec<RawMessage>::Decode(kOp, raw.stored);
            }
            d.head = raw.head;
            d.message_key = std::move(raw.stored.message_key);
            out.push_back(std::move(d));
          }
        }
        return out;
      });
}

}  // namespace compaction
