// Server notices and warnings on the library's connections go to
// ClientOptions::notice_handler (dropped by default), never to the
// application's stderr, where libpq's default processor prints them.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <mutex>
#include <string>
#include <vector>

#include "db_helpers.hpp"
#include "live_db.hpp"

using compaction::Notice;
using testing::LiveDb;

namespace {

// Redirects file descriptor 2 into a temporary file while it lives.
class StderrCapture {
 public:
  StderrCapture() : file_(std::tmpfile()) {
    std::fflush(stderr);
    saved_ = dup(2);
    dup2(fileno(file_), 2);
  }
  ~StderrCapture() {
    Restore();
    std::fclose(file_);
  }
  // Restores stderr and returns what was written to it meanwhile.
  std::string Text() {
    Restore();
    std::string out;
    std::rewind(file_);
    for (int c; (c = std::fgetc(file_)) != EOF;)
      out.push_back(static_cast<char>(c));
    return out;
  }

 private:
  void Restore() {
    if (saved_ < 0) return;
    std::fflush(stderr);
    dup2(saved_, 2);
    close(saved_);
    saved_ = -1;
  }
  std::FILE* file_;
  int saved_ = -1;
};

struct Collected {
  std::mutex mutex;
  std::vector<Notice> notices;
  compaction::NoticeHandler Handler() {
    return [this](const Notice& n) {
      std::lock_guard lock(mutex);
      notices.push_back(n);
    };
  }
  bool Has(const std::string& severity, const std::string& text) {
    std::lock_guard lock(mutex);
    for (const Notice& n : notices) {
      if (n.severity == severity && n.message.find(text) != std::string::npos)
        return true;
    }
    return false;
  }
};

void RaiseWarning(compaction::Client& client) {
  compaction::Tx tx = client.Begin();
  PGresult* r = PQexec(tx.native_handle(),
                       "DO $$BEGIN RAISE WARNING 'notice-test marker'; END$$");
  REQUIRE(PQresultStatus(r) == PGRES_COMMAND_OK);
  PQclear(r);
}

}  // namespace

TEST_CASE("notices reach the handler, and stderr stays silent by default") {
  LiveDb db;
  Collected seen;
  compaction::ClientOptions options;
  options.schema = db.schema();
  options.notice_handler = seen.Handler();
  StderrCapture capture;
  {
    compaction::Client hooked = compaction::Client::Connect("", options);
    RaiseWarning(hooked);
    compaction::Client plain = db.NewClient();
    RaiseWarning(plain);
  }
  const std::string err = capture.Text();
  CHECK(seen.Has("WARNING", "notice-test marker"));
  CHECK(err.empty());
  INFO(err);
}

TEST_CASE(
    "the listener's FATAL on termination reaches its handler, not stderr") {
  LiveDb db;
  Collected seen;
  const std::string app = testing::Unique("notice_listener");
  StderrCapture capture;
  bool lost = false;
  {
    compaction::TopicEventListener listener({{"application_name", app}},
                                            seen.Handler());
    REQUIRE(testing::WaitUntil(
        [&] { return listener.Connect(std::chrono::milliseconds(50)); },
        std::chrono::seconds(10)));
    db.raw().Query(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
        "WHERE application_name = $1",
        {app});
    lost = testing::WaitUntil(
        [&] {
          try {
            listener.Wait(std::chrono::milliseconds(50));
            return false;
          } catch (const compaction::ConnectionLost&) {
            return true;
          }
        },
        std::chrono::seconds(10));
  }
  const std::string err = capture.Text();
  CHECK(lost);
  CHECK(seen.Has("FATAL", "terminating connection"));
  CHECK(err.empty());
  INFO(err);
}
