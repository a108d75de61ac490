// Producing a batch: every message in one call of the topic's
// produce_batch_<id> (sql/topic_v1.sql), which takes the batch's head rows
// in key order, inserts the messages in input order and moves each key's
// head once: the outcome of producing them one by one.
#include "compaction/detail/produce_batch.hpp"

#include <algorithm>
#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "commit_outcome.hpp"
#include "compaction/tx.hpp"
#include "core.hpp"
#include "locked_keys.hpp"
#include "pg/sqlstate.hpp"
#include "produce.hpp"
#include "rows.hpp"
#include "topics.hpp"
#include "validate.hpp"

namespace compaction::detail {
namespace {

constexpr const char* kOp = kProduceBatchOp;
// A destroyed topic's function is gone with its tables: calling it is
// undefined_function, where the single produce's table is undefined_table.

// An array element in the text form array_in reads: quoted, with quotes
// and backslashes escaped, so any text (braces, commas, "NULL") stays
// itself.
void AppendQuoted(std::string& out, std::string_view text) {
  out += '"';
  for (const char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  out += '"';
}

struct Arrays {
  std::string keys = "{", versions = "{", ranks = "{", payloads = "{",
              repeated = "{";
};

// The keys with more than one compacted message in the batch, each once:
// the function moves their heads message by message, and would otherwise
// find them with a statement of its own (sql/topic_v1.sql).
std::string RepeatedKeys(std::span<const BatchElement> batch) {
  std::vector<std::string_view> keys;
  keys.reserve(batch.size());
  for (const BatchElement& e : batch) {
    if (e.options->compaction && e.options->message_key)
      keys.push_back(*e.options->message_key);
  }
  std::sort(keys.begin(), keys.end());
  std::string out = "{";
  for (std::size_t run = 0; run < keys.size();) {
    std::size_t end = run + 1;
    while (end < keys.size() && keys[end] == keys[run]) ++end;
    if (end - run > 1) {
      if (out.size() > 1) out += ',';
      AppendQuoted(out, keys[run]);
    }
    run = end;
  }
  out += '}';
  return out;
}

Arrays BuildArrays(std::span<const BatchElement> batch) {
  Arrays a;
  std::size_t payload_bytes = 0;
  for (const BatchElement& e : batch)
    payload_bytes += e.message.payload_json.size();
  a.payloads.reserve(payload_bytes + payload_bytes / 4 + 8 * batch.size());
  for (std::size_t i = 0; i < batch.size(); ++i) {
    const BatchElement& e = batch[i];
    if (i > 0) {
      a.keys += ',';
      a.versions += ',';
      a.ranks += ',';
      a.payloads += ',';
    }
    if (e.options->message_key) {
      AppendQuoted(a.keys, *e.options->message_key);
    } else {
      a.keys += "NULL";
    }
    a.versions += std::to_string(e.message.schema_version);
    if (e.options->compaction) {
      a.ranks += std::to_string(e.options->compaction->rank);
    } else {
      a.ranks += "NULL";
    }
    if (e.message.tombstone) {
      a.payloads += "NULL";
    } else {
      AppendQuoted(a.payloads, e.message.payload_json);
    }
  }
  a.keys += '}';
  a.versions += '}';
  a.ranks += '}';
  a.payloads += '}';
  a.repeated = RepeatedKeys(batch);
  CheckFitsOneMessage(kOp, {a.keys.size(), a.versions.size(), a.ranks.size(),
                            a.payloads.size(), a.repeated.size()});
  return a;
}

pg::Statement BuildStatement(ClientCore& core, const TopicInfo& topic,
                             std::span<const BatchElement> batch) {
  Arrays a = BuildArrays(batch);
  pg::Params params;
  params.Add(std::move(a.keys))
      .Add(std::move(a.versions))
      .Add(std::move(a.ranks))
      .Add(std::move(a.payloads))
      .Add(std::move(a.repeated));
  return {core.Sql(topic).produce_batch, std::move(params)};
}

// One row per message, in no particular order (the function answers a key
// the batch names more than once in a statement of its own); ids ascend in
// input order, so sorting by id restores it.
std::vector<ProduceResult> Decode(const pg::Result& r, std::size_t expected) {
  const int n = r.rows();
  if (n < 0 || static_cast<std::size_t>(n) != expected) {
    throw InternalError(kOp, "the batch function returned " +
                                 std::to_string(n) + " rows for " +
                                 std::to_string(expected) + " messages");
  }
  std::vector<ProduceResult> out;
  out.reserve(expected);
  for (int row = 0; row < n; ++row) {
    out.push_back(ProduceResult{pg::Int64(r, row, 0),
                                FromMicros(pg::Int64(r, row, 1)),
                                pg::Bool(r, row, 2), 0});
  }
  const auto by_id = [](const ProduceResult& a, const ProduceResult& b) {
    return a.id < b.id;
  };
  if (!std::is_sorted(out.begin(), out.end(), by_id))
    std::sort(out.begin(), out.end(), by_id);
  return out;
}

WrittenMessage Written(const TopicInfo& topic, const BatchElement& element,
                       const ProduceResult& result) {
  return WrittenMessage{topic.id, result.id, element.options->message_key,
                        std::chrono::duration_cast<std::chrono::microseconds>(
                            result.created_at.time_since_epoch())
                            .count()};
}

bool TopicGone(const DatabaseError& e) {
  return e.sqlstate() == pg::kUndefinedTable ||
         e.sqlstate() == pg::kUndefinedFunction;
}

// In a transaction of its own (an implicit one, as for Produce). When the
// connection breaks during its COMMIT, the first message it got back is
// looked for on a new connection: the batch committed whole or not at all.
std::vector<ProduceResult> RunCommitted(ClientCore& core, pg::Session s,
                                        const TopicInfo& topic,
                                        std::span<const BatchElement> batch) {
  // A destroyed topic's produce_batch_<id> is undefined_function, which
  // WithTopic takes for the cue to resolve the topic again.
  const pg::CommittedExec done = pg::ExecCommitted(
      s, kOp, BuildStatement(core, topic, batch), ResultBeforeCommit(core));
  std::optional<std::vector<ProduceResult>> results;
  if (done.rows) results = Decode(done.rows, batch.size());
  if (!done.in_doubt && results) return *results;
  std::optional<WrittenMessage> effect;
  if (results) effect = Written(topic, batch[0], (*results)[0]);
  ResolveBrokenCommit(core, kOp, s.server, effect);
  if (!results) throw InternalError(kOp, "committed without a result");
  return *results;
}

}  // namespace

std::string ProduceBatchSql(const ClientCore& core, std::int64_t id) {
  return "/* compaction:ProduceBatch */ SELECT p.message_id, " +
         Micros("p.message_created_at") + ", p.advanced FROM " + core.schema() +
         ".produce_batch_" + std::to_string(id) +
         "($1::text[], $2::integer[], $3::bigint[], $4::jsonb[], $5::text[]) p";
}

void CheckFitsOneMessage(const char* operation,
                         std::initializer_list<std::size_t> parameter_bytes) {
  // PQ_LARGE_MESSAGE_LIMIT; the Bind's own fields (names, formats, four
  // bytes of length a parameter) take far less than the room left.
  constexpr std::size_t kMaxMessage = (std::size_t{1} << 30) - 1;
  constexpr std::size_t kRoom = 64 * 1024;
  std::size_t total = 0;
  for (std::size_t bytes : parameter_bytes) total += bytes;
  if (total > kMaxMessage - kRoom) {
    throw InvalidArgument(operation,
                          "the batch's keys and payloads take " +
                              std::to_string(total) +
                              " bytes, over PostgreSQL's 1 GB limit on one "
                              "message: split it");
  }
}

void CheckBatchSize(std::size_t size) {
  if (size > kMaxBatchSize) {
    throw InvalidArgument(
        kOp, "a batch takes at most " + std::to_string(kMaxBatchSize) +
                 " messages, got " + std::to_string(size) + ": split it");
  }
}

void ThrowAtElement(std::size_t index, const InvalidArgument& error) {
  std::string_view what = error.what();
  const std::string prefix = error.operation() + ": ";
  if (what.substr(0, prefix.size()) == prefix)
    what.remove_prefix(prefix.size());
  throw InvalidArgument(
      kOp, "element " + std::to_string(index) + ": " + std::string(what));
}

std::vector<ProduceResult> ProduceBatch(ClientCore& core, Tx* tx,
                                        const std::string& topic,
                                        std::span<const BatchElement> batch) {
  ValidateTopicName(kOp, topic);
  CheckBatchSize(batch.size());
  for (std::size_t i = 0; i < batch.size(); ++i) {
    try {
      ValidateProduce(kOp, batch[i].message, *batch[i].options);
    } catch (const InvalidArgument& e) {
      ThrowAtElement(i, e);
    }
  }
  if (batch.empty()) return {};
  if (tx == nullptr) {
    return WithTopic(core, kOp, topic, [&](pg::Session s, const TopicInfo& t) {
      return RunCommitted(core, s, t, batch);
    });
  }
  TxState& state = TxGate::State(*tx);
  const pg::Session s = state.WritingSessionFor(kOp);
  // Resolved through the caller's transaction, as ProduceInTx does.
  std::optional<TopicInfo> info = state.TouchedTopic(topic);
  if (!info) info = ResolveTopic(core, s, kOp, topic);
  for (std::size_t i = 0; i < batch.size(); ++i) {
    try {
      RefuseUncompactedLockedKey(state, info->id, *batch[i].options);
    } catch (const InvalidArgument& e) {
      ThrowAtElement(i, e);
    }
  }
  try {
    const pg::Statement st = BuildStatement(core, *info, batch);
    pg::Result r = pg::ExecStatement(s, kOp, st);
    std::vector<ProduceResult> results = Decode(r, batch.size());
    state.RememberTouchedTopic(*info);
    state.RememberWritten(Written(*info, batch.back(), results.back()));
    return results;
  } catch (const DatabaseError& e) {
    // Destroyed between the lookup and the call (the statement failed, so
    // the transaction is aborted now).
    if (TopicGone(e)) throw TopicNotFound(kOp, topic);
    throw;
  }
}

}  // namespace compaction::detail
