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

// Which partitions may have something new, in one statement: an idle tail
// of many partitions costs one round trip per Next(), not one per
// partition. A partition in the middle of a window always may; the others
// when a committed message's writer is not visible in their position
// (consume_read.cpp's condition, the one Wait and the position lock ask).
// Only a hint: the read itself decides what is delivered. With one
// partition the read is as cheap as the question.
std::vector<bool> News(detail::ClientCore& core, pg::Session s,
                       const TopicInfo& topic,
                       const std::vector<detail::Position>& positions) {
  std::vector<bool> out(positions.size(), true);
  if (positions.size() == 1) return out;
  std::string partitions = "{";
  std::string done = "{";
  for (size_t p = 0; p < positions.size(); ++p) {
    if (positions[p].read) continue;
    out[p] = false;
    if (partitions.size() > 1) {
      partitions += ',';
      done += ',';
    }
    partitions += std::to_string(p);
    // "xmin:xmax:xip,...": digits, colons and commas only.
    done += '"' + positions[p].done + '"';
  }
  if (partitions.size() == 1) return out;
  pg::Result r = pg::Exec(
      s, kOp,
      "/* compaction:TopicTail:news */ SELECT p.partition FROM (SELECT "
      "u.partition, u.done_snapshot, NULL::pg_snapshot AS read_snapshot "
      "FROM ROWS FROM (pg_catalog.unnest($1::integer[]), "
      "pg_catalog.unnest($2::pg_snapshot[])) "
      "u (partition, done_snapshot)) p WHERE " +
          detail::HasNewSql(core.MessageTable(topic.id)),
      pg::Params().Add(partitions + "}").Add(done + "}"));
  for (int row = 0; row < r.rows(); ++row) {
    out[static_cast<size_t>(pg::Int64(r, row, 0))] = true;
  }
  return out;
}

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
                s, kOp,
                std::string("SELECT ") + detail::kWindowSnapshotSql + "::text",
                {});
            start = std::string(pg::Text(r, 0, 0));
          }
          st.positions.assign(static_cast<size_t>(topic.partitions),
                              detail::Position{start, {}, {}, {}});
        }
        const std::vector<bool> news = News(*st.core, s, topic, st.positions);
        std::vector<Delivery<RawMessage>> out;
        for (size_t tried = 0; tried < st.positions.size() && out.empty();
             ++tried) {
          const size_t partition = st.next;
          st.next = (st.next + 1) % st.positions.size();
          if (!news[partition]) continue;
          for (detail::RawDelivery& raw : detail::ReadBatch(
                   *st.core, s, {kOp, st.topic, {}}, topic.id,
                   static_cast<int>(partition), st.options.heads_only,
                   st.options.batch_size, st.positions[partition])) {
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
