// HeadHints (lib/src/head_hints.hpp): the keys a client saw with a head, a
// fixed table of atomic hashes that the lock path reads on every call.
#include "head_hints.hpp"

#include <atomic>
#include <catch2/catch.hpp>
#include <string>
#include <thread>
#include <vector>

using compaction::detail::HeadHints;
using compaction::detail::NewKeyOdds;

TEST_CASE("head hints remember and forget a key per topic") {
  HeadHints hints;
  CHECK_FALSE(hints.Has(1, "k"));
  hints.Set(1, "k", true);
  CHECK(hints.Has(1, "k"));
  CHECK_FALSE(hints.Has(2, "k"));
  CHECK_FALSE(hints.Has(1, "other"));
  hints.Set(1, "k", true);  // again: still one key
  hints.Set(1, "k", false);
  CHECK_FALSE(hints.Has(1, "k"));
  hints.Set(2, "never set", false);  // forgetting an unknown key is harmless
  CHECK_FALSE(hints.Has(2, "never set"));
}

TEST_CASE("head hints stay bounded and keep the newest keys") {
  HeadHints hints;
  const int n = static_cast<int>(HeadHints::kSlots) * 2;
  for (int i = 0; i < n; ++i) hints.Set(7, std::to_string(i), true);
  // A key is only pushed out by later keys of its own pair of slots.
  CHECK(hints.Has(7, std::to_string(n - 1)));
  int kept = 0;
  for (int i = n - 1000; i < n; ++i) kept += hints.Has(7, std::to_string(i));
  CHECK(kept >= 990);
  // Older keys were pushed out (a hint lost costs a round trip, no more).
  int old_kept = 0;
  for (int i = 0; i < 1000; ++i) old_kept += hints.Has(7, std::to_string(i));
  CHECK(old_kept < 500);
}

TEST_CASE("head hints serve threads setting and reading the same keys") {
  HeadHints hints;
  std::atomic<long> found{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      long mine = 0;
      for (int round = 0; round < 20000; ++round) {
        const std::string key = std::to_string(round % 500);
        hints.Set(3, key, (round + t) % 7 != 0);
        mine += hints.Has(3, key);
      }
      found += mine;
    });
  }
  for (auto& th : threads) th.join();
  // Each thread set most keys just before reading them.
  CHECK(found.load() > 4 * 20000 / 2);
  for (int k = 0; k < 500; ++k) hints.Set(3, std::to_string(k), true);
  for (int k = 0; k < 500; ++k) CHECK(hints.Has(3, std::to_string(k)));
}

TEST_CASE("two keys in use keep their pair against a third") {
  // Keys of topic 5 whose hashes share one pair of slots.
  const std::size_t pair = HeadHints::PairOf(5, "a");
  std::vector<std::string> same;
  for (int i = 0; same.size() < 3; ++i) {
    const std::string key = "k" + std::to_string(i);
    if (HeadHints::PairOf(5, key) == pair) same.push_back(key);
  }
  HeadHints hints;
  hints.Set(5, "a", true);  // in the pair long before the others
  for (int round = 0; round < 10; ++round) {
    hints.Set(5, same[0], true);
    hints.Set(5, same[1], true);
    CHECK(hints.Has(5, same[0]));
    CHECK(hints.Has(5, same[1]));
  }
  CHECK_FALSE(hints.Has(5, "a"));  // the oldest went
  hints.Set(5, same[2], true);     // a third pushes out the older of two
  CHECK(hints.Has(5, same[2]));
  CHECK(hints.Has(5, same[1]));
  CHECK_FALSE(hints.Has(5, same[0]));
}

TEST_CASE("new-key odds switch on new keys and off on keys with a head") {
  NewKeyOdds odds;
  CHECK_FALSE(odds.Likely(1));  // a fresh client asks lock_<id>
  for (int i = 0; i < NewKeyOdds::kLikely - 1; ++i) odds.Record(1, true);
  CHECK_FALSE(odds.Likely(1));
  odds.Record(1, true);
  CHECK(odds.Likely(1));
  CHECK_FALSE(odds.Likely(2));  // per topic
  // Capped: as many keys with a head as it took to fill it, over kHeadCost,
  // switch it off again however long it was on.
  for (int i = 0; i < 1000; ++i) odds.Record(1, true);
  const int to_off =
      (NewKeyOdds::kCap - NewKeyOdds::kLikely) / NewKeyOdds::kHeadCost + 1;
  for (int i = 0; i < to_off - 1; ++i) odds.Record(1, false);
  CHECK(odds.Likely(1));
  odds.Record(1, false);
  CHECK_FALSE(odds.Likely(1));
  // Four headless keys in five hold it where it is.
  for (int i = 0; i < 1000; ++i) odds.Record(1, false);
  for (int i = 0; i < NewKeyOdds::kLikely; ++i) odds.Record(1, true);
  for (int round = 0; round < 100; ++round) {
    for (int i = 0; i < NewKeyOdds::kHeadCost; ++i) odds.Record(1, true);
    odds.Record(1, false);
    REQUIRE(odds.Likely(1));
  }
}
