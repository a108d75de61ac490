#include "daemon/app.hpp"

#include <csignal>
#include <cstdlib>

#include "daemon/conninfo.hpp"
#include "daemon/duration.hpp"
#include "daemon/failure.hpp"
#include "daemon/log.hpp"
#include "daemon/systemd_notify.hpp"
#include "daemon/version.hpp"

namespace compactiond {
namespace {

constexpr auto kShutdownPoll = std::chrono::milliseconds(20);
constexpr auto kCancelRepeat = std::chrono::milliseconds(200);

std::string Join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ",") + s;
  return out;
}

bool IsSchemaMissing(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const compaction::SchemaVersionMismatch& mismatch) {
    return mismatch.not_installed();
  } catch (...) {
    return false;
  }
}

}  // namespace

App::App(std::vector<std::string> args, Invocation invocation)
    : args_(std::move(args)),
      invocation_(std::move(invocation)),
      settings_(invocation_.settings),
      probe_(Version(), settings_.metrics_per_topic),
      signals_(io_, SIGTERM, SIGINT, SIGHUP),
      watchdog_timer_(io_),
      shutdown_timer_(io_) {}

App::~App() {
  if (canceller_.joinable()) canceller_.join();
  if (reload_thread_.joinable()) reload_thread_.join();
}

void App::Build() {
  pool_ = std::make_unique<WorkerPool>(io_, settings_.pool_size);
  db_ = std::make_unique<Database>(
      io_, *pool_, probe_, ConnectionParams(settings_),
      ClientOptionsFor(settings_),
      Database::Callbacks{[this] {
                            // Ready again once the new connection has
                            // listed the topics: the list in hand is from
                            // before, perhaps from another primary.
                            topics_loaded_ = false;
                            topics_error_.clear();
                            topics_->Trigger();
                            stats_->RefreshNow();
                            UpdateReady();
                          },
                          [this] { UpdateReady(); }});
  db_->SetBackoff(settings_.reconnect_min, settings_.reconnect_max);
  scheduler_ = std::make_unique<Scheduler>(io_, *pool_, *db_, probe_,
                                           ScheduleSettings::From(settings_));
  topics_ = std::make_unique<PeriodicJob<std::vector<compaction::TopicInfo>>>(
      io_, *pool_, *db_, settings_.topic_refresh_interval,
      [](compaction::Client& client) { return client.ListTopics(); },
      [this](Outcome<std::vector<compaction::TopicInfo>>& outcome,
             const std::shared_ptr<compaction::Client>&) {
        OnTopics(outcome);
      });
  topics_->SetRetry(settings_.reconnect_max);
  // A flood of well-formed NOTIFYs (any role may send them) lists the
  // topics at most once a second, not back to back.
  topics_->SetMinSpacing(std::chrono::seconds(1));
  stats_ = std::make_unique<StatsCache>(io_, *pool_, *db_, probe_,
                                        settings_.stats_interval,
                                        settings_.stats_exact_count_limit);
  if (settings_.listen_notify) BuildListener();
  // /metrics is rendered off the event loop and cached by the server, so
  // /healthz stays fast under scrape load; the probe is thread-safe.
  http_ = std::make_unique<HttpServer>(
      io_, [this](const std::string& path) { return Handle(path); },
      HttpCachedRoute{"/metrics", "text/plain; version=0.0.4; charset=utf-8",
                      [this] { return probe_.Serialize(); }});
}

void App::BuildListener() {
  std::map<std::string, std::string> params = ConnectionParams(settings_);
  // Without prepared statements a transaction pooler may sit in front, and
  // refuse the startup options; LISTEN and its check need none of them.
  if (!settings_.prepared_statements) params.erase("options");
  listener_ = std::make_unique<TopicListener>(
      std::move(params), settings_.schema, settings_.reconnect_min,
      settings_.reconnect_max,
      TopicListener::Callbacks{
          [this] { asio::post(io_, [this] { topics_->Trigger(); }); },
          [this](bool connected) {
            probe_.SetListening(connected);
            // A dropped LISTEN connection is the quickest sign of an outage:
            // probe the database now instead of at the next refresh.
            if (!connected) asio::post(io_, [this] { stats_->RefreshNow(); });
          },
          // On the listener's thread: settings_ is read on the event
          // loop's, where a reload assigns it.
          [this] {
            asio::post(io_, [this] {
              LogWarn("listener",
                      "LISTEN does not work on this connection; polling the "
                      "topic list instead",
                      {{"topic_refresh_interval",
                        FormatDuration(settings_.topic_refresh_interval)}});
            });
          }});
}

bool App::StartHttp() {
  auto [host, port] = ParseListen("listen", settings_.listen);
  try {
    auto endpoint = http_->Listen(host, port);
    LogInfo("http", "listening",
            {{"address", endpoint.address().to_string()},
             {"port", static_cast<int>(endpoint.port())}});
    return true;
  } catch (const boost::system::system_error& e) {
    LogError("http", "cannot listen",
             {{"listen", settings_.listen}, {"error", e.code().message()}});
    return false;
  }
}

int App::Run() {
  SetLogLevel(settings_.log_level);
  Build();
  LogInfo("app", "starting",
          {{"version", Version()},
           {"schema", settings_.schema},
           {"pool_size", settings_.pool_size},
           {"systemd", systemd::UnderSystemd()}});
  if (!StartHttp()) return 1;
  WaitForSignal();
  if (auto every = systemd::WatchdogPingInterval()) PingWatchdog(*every);
  // Ready for systemd once the endpoints serve: a database outage is
  // reported by /readyz and compaction_up, and must not make systemd kill
  // a daemon that is correctly waiting for the database to return.
  systemd::NotifyReady();
  systemd::NotifyStatus("waiting for the database");
  probe_.SetUp(false);
  probe_.SetReady(false);
  db_->Start();
  stats_->Start();
  if (listener_) {
    listener_->Start();
  } else {
    LogInfo("listener", "listen-notify = false: polling the topic list",
            {{"topic_refresh_interval",
              FormatDuration(settings_.topic_refresh_interval)}});
  }
  io_.run();
  // Only reached after a clean shutdown: every sweep has returned.
  if (listener_) listener_->Stop();
  pool_->Join();
  LogInfo("app", "stopped");
  return 0;
}

void App::WaitForSignal() {
  signals_.async_wait([this](const boost::system::error_code& ec, int signal) {
    if (ec) return;
    OnSignal(signal);
    WaitForSignal();
  });
}

void App::OnSignal(int signal) {
  if (signal == SIGHUP) {
    if (!stopping_) Reload();
    return;
  }
  if (stopping_) {
    LogWarn("app", "second signal, exiting at once", {{"signal", signal}});
    std::_Exit(1);
  }
  BeginShutdown(signal);
}

// Reads the configuration on a thread of its own and applies it on the
// event loop, which keeps serving /healthz and signals meanwhile (the file
// is bounded, but may sit on a slow or hung file system). One read at a
// time; a SIGHUP during it asks for one more read after it.
void App::Reload() {
  if (reloading_) {
    reload_again_ = true;
    return;
  }
  reloading_ = true;
  if (reload_thread_.joinable()) reload_thread_.join();  // ended already
  reload_thread_ = std::thread([this] {
    auto fresh = std::make_shared<Invocation>();
    std::string error;
    try {
      *fresh = ParseInvocation(args_);
    } catch (const ConfigError& e) {
      error = e.what();
    } catch (const std::exception& e) {
      error = std::string("cannot read the configuration: ") + e.what();
    }
    asio::post(io_, [this, fresh, error] {
      reloading_ = false;
      if (stopping_) return;
      if (error.empty()) {
        Apply(std::move(*fresh));
      } else {
        LogError("app", "reload failed; keeping the running configuration",
                 {{"error", error}});
      }
      if (reload_again_) {
        reload_again_ = false;
        Reload();
      }
    });
  });
}

void App::Apply(Invocation fresh) {
  // The settings table says which keys only a restart applies; those keep
  // their running value, so later comparisons stay honest.
  ReloadPlan plan = PlanReload(settings_, fresh.settings);
  if (!plan.ignored.empty()) {
    LogWarn("app", "changed settings need a restart; ignored",
            {{"keys", Join(plan.ignored)}});
  }
  settings_ = plan.settings;
  SetLogLevel(settings_.log_level);
  scheduler_->Reconfigure(ScheduleSettings::From(settings_));
  stats_->SetPeriod(settings_.stats_interval);
  stats_->SetExactCountLimit(settings_.stats_exact_count_limit);
  topics_->SetPeriod(settings_.topic_refresh_interval);
  topics_->SetRetry(settings_.reconnect_max);
  db_->SetBackoff(settings_.reconnect_min, settings_.reconnect_max);
  LogInfo("app", "configuration reloaded",
          {{"batch_size", settings_.batch_size},
           {"max_batches", settings_.max_batches},
           {"min_interval_ms",
            static_cast<std::int64_t>(settings_.min_interval.count())},
           {"max_interval_ms",
            static_cast<std::int64_t>(settings_.max_interval.count())},
           {"log_level", std::string(LogLevelName(settings_.log_level))}});
  topics_->Trigger();
}

void App::OnTopics(Outcome<std::vector<compaction::TopicInfo>>& outcome) {
  if (!outcome.ok()) {
    if (!IsConnectionError(outcome.error)) {
      LogError("app", "cannot list topics",
               {{"error", Describe(outcome.error)},
                {"hint", IsSchemaMissing(outcome.error)
                             ? "run: compactiond schema install"
                             : ""}});
      // Not ready until a listing succeeds: the list in hand may be
      // stale, and what failed it (a schema missing on a new primary, a
      // revoked grant) fails the sweeps as well. A timeout, a lock wait
      // or a serialization failure passes: one slow moment of the server
      // must not take a sidecar's pod out of its Service.
      if (!IsTransient(outcome.error)) {
        topics_loaded_ = false;
        topics_error_ = Describe(outcome.error);
        UpdateReady();
      }
    }
    return;
  }
  topics_error_.clear();
  size_t before = scheduler_->topic_count();
  scheduler_->SetTopics(*outcome.value);
  LogDebug("app", "topics listed",
           {{"topics", static_cast<std::int64_t>(scheduler_->topic_count())}});
  if (!topics_loaded_ || before != scheduler_->topic_count()) {
    LogInfo("app", "topics loaded",
            {{"topics", static_cast<std::int64_t>(scheduler_->topic_count())}});
    stats_->RefreshNow();  // series of new topics get values promptly
  }
  topics_loaded_ = true;
  UpdateReady();
}

void App::UpdateReady() {
  bool ready = !stopping_ && db_->up() && topics_loaded_;
  probe_.SetReady(ready);
  if (ready == ready_) return;
  ready_ = ready;
  LogInfo("app", ready ? "ready" : "not ready",
          {{"database_up", db_->up()}, {"topics_loaded", topics_loaded_}});
  systemd::NotifyStatus(ready ? "sweeping" : "waiting for the database");
}

HttpResponse App::Handle(const std::string& path) {
  // /metrics never comes here: the server renders it off the event loop
  // and shares the cached text between scrapes (see App::Build).
  if (path == "/healthz") return {200, "text/plain; charset=utf-8", "ok\n"};
  if (path == "/readyz") {
    if (ready_) return {200, "text/plain; charset=utf-8", "ready\n"};
    std::string why = stopping_    ? "shutting down"
                      : !db_->up() ? db_->down_reason()
                      : topics_error_.empty()
                          ? "topics not loaded"
                          : "cannot list topics: " + topics_error_;
    return {503, "text/plain; charset=utf-8", "not ready: " + why + "\n"};
  }
  if (path == "/") {
    return {200, "text/plain; charset=utf-8",
            "compactiond: /metrics /healthz /readyz\n"};
  }
  return {404, "text/plain; charset=utf-8", "not found\n"};
}

void App::PingWatchdog(Millis every) {
  systemd::NotifyWatchdog();
  watchdog_timer_.expires_after(every);
  watchdog_timer_.async_wait(
      [this, every](const boost::system::error_code& ec) {
        if (!ec) PingWatchdog(every);
      });
}

void App::BeginShutdown(int signal) {
  stopping_ = true;
  systemd::NotifyStopping();
  LogInfo("app", "shutting down",
          {{"signal", signal}, {"sweeps_in_flight", scheduler_->in_flight()}});
  // Last resort: whatever hangs (a dead host mid-connect), exit in time. A
  // batch cut off here is rolled back by the server, which is harmless.
  Millis limit = settings_.shutdown_timeout;
  std::thread([limit] {
    std::this_thread::sleep_for(limit);
    LogWarn("app", "shutdown timeout; exiting with work in flight",
            {{"timeout_ms", static_cast<std::int64_t>(limit.count())}});
    std::_Exit(0);
  }).detach();
  scheduler_->Stop();
  topics_->Stop();
  stats_->Stop();
  db_->Stop();
  UpdateReady();
  // PQcancel blocks on the network, so it runs on its own thread; repeated,
  // because a sweep that was just starting may miss the first cancel.
  canceller_ = std::thread([this] {
    while (!sweeps_done_) {
      scheduler_->CancelInFlight();
      std::this_thread::sleep_for(kCancelRepeat);
    }
  });
  PollShutdown();
}

void App::PollShutdown() {
  if (scheduler_->in_flight() == 0) {
    sweeps_done_ = true;
    http_->Stop();
    watchdog_timer_.cancel();
    signals_.cancel();
    io_.stop();
    return;
  }
  shutdown_timer_.expires_after(kShutdownPoll);
  shutdown_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (!ec) PollShutdown();
  });
}

}  // namespace compactiond
