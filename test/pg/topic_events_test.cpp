// TopicEventListener against a live server: what Register and Destroy
// announce arrives parsed, a hostile payload arrives refused, and the
// connection carries the library's search_path pin.
#include "compaction/topic_events.hpp"

#include <catch2/catch.hpp>
#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "live_db.hpp"

using compaction::TopicEventListener;
using testing::Counter;
using testing::LiveDb;

namespace {

using Params = std::map<std::string, std::string>;

TopicEventListener Listening() {
  TopicEventListener listener(
      Params{{"application_name", "topic_events_test"}});
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!listener.Connect(std::chrono::milliseconds(100))) {
    REQUIRE(std::chrono::steady_clock::now() < deadline);
  }
  return listener;
}

// The next notifications of this test (parallel tests notify on the same
// channel): events of `db`'s schema, refusals of what `db.raw()` sent.
// Waits up to 10 s for at least `n`.
std::vector<TopicEventListener::Notification> Next(TopicEventListener& listener,
                                                   LiveDb& db, std::size_t n) {
  std::vector<TopicEventListener::Notification> out;
  const int ours = db.raw().BackendPid();
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (out.size() < n && std::chrono::steady_clock::now() < deadline) {
    for (auto& note : listener.Wait(std::chrono::milliseconds(100))) {
      if (note.event ? note.event->schema == db.schema()
                     : note.sender_pid == ours) {
        out.push_back(std::move(note));
      }
    }
  }
  REQUIRE(out.size() >= n);
  return out;
}

}  // namespace

TEST_CASE(
    "TopicEventListener hears Register and Destroy and refuses a forged "
    "payload") {
  LiveDb db;
  std::optional<TopicEventListener> listener = Listening();
  auto topic = db.client().Topic<Counter>("heard");
  topic.Register();
  auto registered = Next(*listener, db, 1);
  REQUIRE(registered[0].event.has_value());
  CHECK(registered[0].event->schema == db.schema());
  CHECK(registered[0].event->topic == "heard");
  CHECK(registered[0].event->event == "registered");
  topic.Destroy();
  auto destroyed = Next(*listener, db, 1);
  REQUIRE(destroyed[0].event.has_value());
  CHECK(destroyed[0].event->event == "destroyed");
  db.raw().Query(std::string("SELECT pg_notify('") +
                 compaction::kTopicEventChannel + "', '[[[\"secret\"]]]')");
  auto forged = Next(*listener, db, 1);
  CHECK_FALSE(forged[0].event.has_value());
  CHECK(forged[0].why == "payload is not a JSON object");
}

TEST_CASE(
    "TopicEventListener refuses what libpq cannot start, as ConnectionLost") {
  CHECK_THROWS_AS(TopicEventListener(Params{{"no_such_keyword", "1"}}),
                  compaction::ConnectionLost);
}
