// Helpers of the consumer tests.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "live_db.hpp"

namespace testing {

// Polls in committed transactions until a Poll returns nothing (at most
// `rounds`); every delivery in order.
template <class M>
std::vector<compaction::Delivery<M>> ConsumeAll(compaction::Client& client,
                                                compaction::Consumer<M>& c,
                                                int rounds = 1000) {
  std::vector<compaction::Delivery<M>> out;
  for (int i = 0; i < rounds; ++i) {
    auto batch =
        client.InTransaction([&](compaction::Tx& tx) { return c.Poll(tx); });
    if (batch.empty()) break;
    for (auto& d : batch) out.push_back(std::move(d));
  }
  return out;
}

template <class M>
std::vector<std::int64_t> Ids(const std::vector<compaction::Delivery<M>>& ds) {
  std::vector<std::int64_t> out;
  for (const auto& d : ds) out.push_back(d.id);
  return out;
}

// The committed message ids of a topic's log, ascending.
inline std::vector<std::int64_t> LogIds(LiveDb& db, const std::string& topic) {
  std::vector<std::int64_t> out;
  for (auto& row : db.raw().Query("SELECT id FROM " + db.MessageTable(topic) +
                                  " ORDER BY id")) {
    out.push_back(std::stoll(*row[0]));
  }
  return out;
}

// The naive follower every test here must beat: "everything above the last
// id I saw", as the origin system's first fence did. Returns the new ids and
// moves `last`.
inline std::vector<std::int64_t> NaiveRead(LiveDb& db, const std::string& topic,
                                           std::int64_t& last) {
  std::vector<std::int64_t> out;
  for (auto& row : db.raw().Query("SELECT id FROM " + db.MessageTable(topic) +
                                      " WHERE id > $1::bigint ORDER BY id",
                                  {std::to_string(last)})) {
    out.push_back(std::stoll(*row[0]));
    last = out.back();
  }
  return out;
}

}  // namespace testing
