// KeyHandle::Update: the locked read-modify-write in one call, retried
// where a retry cannot repeat a committed write.
#include <exception>
#include <optional>
#include <string>
#include <tuple>

#include "compaction/errors.hpp"
#include "compaction/tx.hpp"
#include "core.hpp"
#include "lock.hpp"
#include "produce.hpp"
#include "tx_internal.hpp"
#include "validate.hpp"

namespace compaction::detail {
namespace {

constexpr const char* kOp = "Update";
constexpr int kMaxAttempts = 100;

// What fn threw, carried past UpdateKey's retries and rethrown as it was:
// fn's own library calls may fail with the errors an attempt retries, but
// fn may have done what a retry would repeat.
struct FnThrew {
  std::exception_ptr error;
};

// One transaction: lock, fn, produce, commit.
std::optional<Updated> Attempt(ClientCore& core, const std::string& topic,
                               const std::string& key,
                               const UpdateOptions& options,
                               const UpdateFn& fn) {
  Tx tx = BeginTx(core);  // rolled back by its destructor on any throw
  LockedRow locked = LockHeadRow(core, tx, topic, key, options.lock);
  std::optional<RawStored> value = locked.head;
  if (value && value->message.tombstone) value.reset();
  std::optional<Outgoing> next;
  try {
    next = fn(std::move(value));
  } catch (...) {
    throw FnThrew{std::current_exception()};
  }
  if (!next) {
    // Nothing to produce: rolling back also drops a headless row the lock
    // created, so the key is left as it was found.
    tx.Rollback();
    return std::nullopt;
  }
  const RawStored* head = locked.head ? &*locked.head : nullptr;
  const std::int64_t rank = options.rank.value_or(
      head != nullptr ? head->compaction_rank.value_or(0) : 0);
  // Under the row lock no other writer moves the head, and our message's
  // id is above the head's: it wins exactly when (schema_version, rank)
  // is at least the head's. A loser would be stored and never read back.
  if (head != nullptr &&
      std::make_tuple(next->schema_version, rank) <
          std::make_tuple(head->schema_version,
                          head->compaction_rank.value_or(0))) {
    throw InvalidArgument(
        kOp, "the new value (schema_version " +
                 std::to_string(next->schema_version) + ", rank " +
                 std::to_string(rank) +
                 ") would not become the key's head (schema_version " +
                 std::to_string(head->schema_version) + ", rank " +
                 std::to_string(head->compaction_rank.value_or(0)) +
                 "); nothing was written");
  }
  ProduceOptions produce;
  produce.message_key = key;
  produce.compaction = CompactionOptions{rank};
  // The produce and COMMIT in one round trip.
  ProduceResult result = ProduceAndCommit(core, tx, topic, *next, produce);
  return Updated{result, next->schema_version, rank};
}

}  // namespace

std::optional<Updated> UpdateKey(ClientCore& core, const std::string& topic,
                                 const std::string& key,
                                 const UpdateOptions& options,
                                 const UpdateFn& fn) {
  ValidateTopicName(kOp, topic);
  ValidateMessageKey(kOp, key);
  ValidateLimit(kOp, "attempts", options.attempts, kMaxAttempts);
  for (int attempt = 1;; ++attempt) {
    try {
      return Attempt(core, topic, key, options, fn);
    } catch (const FnThrew& threw) {
      std::rethrow_exception(threw.error);
    } catch (const RetryableError& e) {
      if (attempt >= options.attempts) throw;
      if (options.on_retry) options.on_retry(e, attempt);
    } catch (const ConnectionLost& e) {
      // Thrown before COMMIT was sent, or by a COMMIT proven not to have
      // committed (Tx::Commit); one that may have committed is
      // CommitOutcomeUnknown, which is never caught here.
      if (attempt >= options.attempts) throw;
      if (options.on_retry) options.on_retry(e, attempt);
    }
  }
}

}  // namespace compaction::detail
