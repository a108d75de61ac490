// TopicListener: a thread over the library's TopicEventListener, so the
// daemon learns of registered and destroyed topics within moments instead
// of at the next periodic refresh. Notifications whose payload names
// another schema are ignored, bad ones logged (throttled). After every
// (re)connect it reports an event too, since notifications sent while it
// was away are lost.
//
// The thread waits in 250 ms slices and checks a stop flag, so Stop()
// returns within about that long, even mid-connect.
//
// Lifetime: Start() once; Stop() (or the destructor) joins the thread.
// Thread safety: Start/Stop from one thread; the callbacks run on the
// listener thread and must only post work elsewhere.
#pragma once

#include <atomic>
#include <compaction/topic_events.hpp>
#include <cstddef>
#include <exception>
#include <functional>
#include <map>
#include <string>
#include <thread>

#include "daemon/config.hpp"
#include "daemon/throttle.hpp"

namespace compactiond {

class TopicListener {
 public:
  struct Callbacks {
    std::function<void()> on_topics_changed;
    std::function<void(bool connected)> on_connection;
    // LISTEN cannot work on this connection (refused, or a transaction
    // pooler in between); the thread has ended, once and for all.
    std::function<void()> on_unavailable;
  };

  // `params`: libpq keyword → value, application_name included.
  TopicListener(std::map<std::string, std::string> params, std::string schema,
                Millis retry_min, Millis retry_max, Callbacks callbacks);
  ~TopicListener();
  TopicListener(const TopicListener&) = delete;
  TopicListener& operator=(const TopicListener&) = delete;

  void Start();
  void Stop();

 private:
  void Run();
  bool Session();  // one connection's life; false when stopping
  bool Sleep(Millis d);
  void SessionFailed(std::exception_ptr error) noexcept;
  // True when the notification announces a change in our schema.
  bool HandleNotification(
      const compaction::TopicEventListener::Notification& note);
  void WarnBadPayload(const std::string& why, std::size_t bytes,
                      int sender_pid);

  const std::map<std::string, std::string> params_;
  const std::string schema_;
  const Millis retry_min_;
  const Millis retry_max_;
  Callbacks callbacks_;
  WarningThrottle bad_payload_throttle_;  // listener thread only
  std::atomic<bool> stop_{false};
  // The last attempt was refused (AuthenticationFailed): retry slowly.
  bool refused_ = false;
  std::thread thread_;
};

}  // namespace compactiond
