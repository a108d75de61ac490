// TopicHandle<M> and KeyHandle<M>: named handles onto a topic and one of its
// message keys. Creating a handle does no I/O; every call resolves the topic
// by name. Lifetime: handles keep the client's connection pool alive and are
// cheap to copy. Thread safety: safe to use from many threads at once.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "compaction/consumer.hpp"
#include "compaction/detail/entry_points.hpp"
#include "compaction/message.hpp"
#include "compaction/options.hpp"
#include "compaction/producer.hpp"
#include "compaction/stats.hpp"
#include "compaction/tx.hpp"

namespace compaction {

class Client;
template <Message M>
class TopicHandle;

// From TopicHandle<M>::Key.
template <Message M>
class KeyHandle {
 public:
  // Plain read outside any transaction: the key's materialized head, or
  // nullopt when the key has no value (absent, headless, or its head is a
  // tombstone).
  std::optional<StoredMessage<M>> CompactionHead() const {
    return Decode("CompactionHead",
                  detail::ReadHead(*core_, topic_, message_key_));
  }

  // Ensures and locks the key's compaction-head row FOR UPDATE inside `tx`
  // (the topic is resolved through `tx` too), creating a headless row when
  // the key has none. Returns the head message, or nullopt for a headless
  // row or a key whose head is a tombstone (the row is locked all the
  // same). The lock is held until `tx` ends; produce the next value with
  // ProduceInTx below on the same `tx` (a Producer's keyed produce without
  // compaction to a key the transaction locked is InvalidArgument). One
  // round trip for the lock whatever the key's state, when the client's
  // guess of that state holds (it remembers which keys had a head, and
  // whether the topic's unseen keys were mostly new); a wrong guess costs
  // one more round trip, never a wrong answer. The first time `tx`
  // touches the topic it is also resolved through `tx`, in the same round
  // trip (with BEGIN) when the lock is `tx`'s first statement and the
  // client knows the topic, in a round trip of its own otherwise.
  // Savepoints: the library remembers the locked key until `tx` ends and
  // cannot see SAVEPOINT / ROLLBACK TO SAVEPOINT sent on native_handle()
  // (or on a borrowed connection). After the caller rolls back to a
  // savepoint taken before this call, PostgreSQL has released the row
  // lock, but that refusal still applies to the key for the rest of `tx`
  // (on the safe side: it never lets an uncompacted produce through to a
  // key still locked); produce compacted, through ProduceInTx below, or in
  // another transaction. A LockTimeout remembers nothing.
  std::optional<StoredMessage<M>> LockCompactionHead(
      Tx& tx, const LockOptions& options = {}) const {
    return Decode("LockCompactionHead",
                  detail::LockHead(*core_, tx, topic_, message_key_, options));
  }

  // Produces `message` as a version of this key inside `tx`: always
  // compacted (the key's head moves to it when it wins, with
  // `compaction.rank`), the key always this handle's. Errors as
  // Producer::ProduceInTx. ProduceResult::not_advanced stays 0 (it is a
  // Producer's count).
  ProduceResult ProduceInTx(Tx& tx, const M& message,
                            CompactionOptions compaction = {}) const {
    ProduceOptions options;
    options.message_key = message_key_;
    options.compaction = compaction;
    return detail::ProduceInTx(
        *core_, tx, topic_,
        detail::Outgoing{
            detail::Codec<M>::SchemaVersion(message),
            detail::DumpPayload("Produce", detail::Codec<M>::Encode(message))},
        options);
  }

  // The locked read-modify-write in one call: in a transaction of its own,
  // locks the key (LockCompactionHead with options.lock), calls
  // fn(current) with the key's value (std::optional<M>, empty when the key
  // has none) and produces what fn returns as the key's next version,
  // compacted, then commits. fn returning an empty optional produces
  // nothing (and leaves no headless row). Returns the new head, or nullopt
  // when fn returned nullopt. The new value must win over the head
  // (schema_version, then rank: see UpdateOptions::rank), or nothing is
  // written (InvalidArgument). RetryableError and ConnectionLost end an
  // attempt, and the whole transaction, fn included, is tried again up to
  // options.attempts times; CommitOutcomeUnknown (it may have committed)
  // and anything fn throws are passed on at once. fn may run more than
  // once: keep its side effects to its return value.
  template <class F>
  std::optional<StoredMessage<M>> Update(
      F&& fn, const UpdateOptions& options = {}) const requires
      std::is_invocable_r_v<std::optional<M>, F&, const std::optional<M>&> {
    std::optional<M> next;
    std::optional<detail::Updated> updated = detail::UpdateKey(
        *core_, topic_, message_key_, options,
        [&](std::optional<detail::RawStored> raw)
            -> std::optional<detail::Outgoing> {
          std::optional<M> current;
          if (raw) {
            current =
                detail::DecodeStored<M>("Update", std::move(*raw)).message;
          }
          next = fn(std::as_const(current));
          if (!next) return std::nullopt;
          return detail::Outgoing{
              detail::Codec<M>::SchemaVersion(*next),
              detail::DumpPayload("Update", detail::Codec<M>::Encode(*next))};
        });
    if (!updated) return std::nullopt;
    return StoredMessage<M>{updated->result.id,         message_key_,
                            updated->schema_version,    updated->rank,
                            updated->result.created_at, std::move(*next)};
  }

  // The key's messages still in the log, newest first, superseded ones
  // included (the log cleaner removes them after the topic's retention).
  // Tombstones are skipped, except for RawMessage, which shows them with
  // `tombstone` set.
  std::vector<StoredMessage<M>> Messages(int limit) const {
    std::vector<StoredMessage<M>> out;
    for (auto& raw : detail::KeyMessages(*core_, topic_, message_key_, limit,
                                         std::is_same_v<M, RawMessage>)) {
      out.push_back(detail::DecodeStored<M>("Messages", std::move(raw)));
    }
    return out;
  }

  const std::string& message_key() const { return message_key_; }
  const std::string& topic_name() const { return topic_; }

 private:
  friend class TopicHandle<M>;

  KeyHandle(std::shared_ptr<detail::ClientCore> core, std::string topic,
            std::string message_key)
      : core_(std::move(core)),
        topic_(std::move(topic)),
        message_key_(std::move(message_key)) {}

  static std::optional<StoredMessage<M>> Decode(
      const char* operation, std::optional<detail::RawStored> raw) {
    if (!raw) return std::nullopt;
    return detail::DecodeStored<M>(operation, std::move(*raw));
  }

  std::shared_ptr<detail::ClientCore> core_;
  std::string topic_;
  std::string message_key_;
};

// From Client::Topic<M>.
template <Message M>
class TopicHandle {
 public:
  // Creates the topic and its tables, or updates an existing one. Unset
  // TopicConfig fields: a new topic gets the default, an existing topic
  // keeps its value (so calling Register() at every start never undoes
  // what an operator set). A set field that differs from an existing
  // topic's value changes it, which only the owner role (or a role it
  // granted UPDATE on the topic row) may do: DatabaseError 42501 for the
  // app role (doc/roles.md). Validates the name ([a-z0-9._-], 1..100
  // characters, starting with a letter or digit) and every set field
  // before any write.
  TopicInfo Register(const TopicConfig& config = {}) {
    return detail::RegisterTopic(*core_, name_, config);
  }

  KeyHandle<M> Key(std::string message_key) const {
    return KeyHandle<M>(core_, name_, std::move(message_key));
  }

  // Resolves the topic once; throws TopicNotFound when it is not registered.
  Producer<M> RegisterProducer() {
    return Producer<M>(core_, detail::FindTopic(*core_, name_));
  }

  // A consumer of this topic named `name` (the topic-name rules; checked
  // here, with the options, InvalidArgument). No I/O: its positions are
  // created by its first Poll, at the start of the topic.
  compaction::Consumer<M> Consumer(std::string name,
                                   ConsumerOptions options = {}) const {
    return compaction::Consumer<M>(core_, name_, std::move(name), options);
  }

  // Heads with a value (neither headless nor a tombstone) in message_key
  // order (by bytes, whatever the database's collation), after
  // options.after_key.
  std::vector<StoredMessage<M>> ListCompactionHeads(
      const ListOptions& options = {}) const {
    std::vector<StoredMessage<M>> out;
    for (auto& raw : detail::ListHeads(*core_, name_, options)) {
      out.push_back(
          detail::DecodeStored<M>("ListCompactionHeads", std::move(raw)));
    }
    return out;
  }

  // Headless rows (exact up to options.exact_count_limit), the oldest one's
  // age and the janitor's state; see TopicStats.
  TopicStats Stats(const StatsOptions& options = {}) const {
    return detail::GetTopicStats(*core_, name_, options);
  }
  TopicInfo Info() const { return detail::FindTopic(*core_, name_); }

  // Drops the topic row and its tables. Throws TopicNotFound when absent.
  void Destroy() { detail::DestroyTopic(*core_, name_); }

  const std::string& name() const { return name_; }

 private:
  friend class Client;

  TopicHandle(std::shared_ptr<detail::ClientCore> core, std::string name)
      : core_(std::move(core)), name_(std::move(name)) {}

  std::shared_ptr<detail::ClientCore> core_;
  std::string name_;
};

}  // namespace compaction
