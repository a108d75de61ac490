// App: the `run` subcommand. Owns the io_context and every long-lived part:
// worker pool, database link, scheduler, topic list and statistics refresh,
// LISTEN thread, HTTP endpoints, signals and systemd notifications.
//
// Signals: SIGTERM/SIGINT stop the timers, cancel the sweeps in flight
// (PQcancel) and exit 0 once they return (at the latest after
// shutdown-timeout); a second SIGTERM/SIGINT exits 1 at once. SIGHUP re-reads
// the configuration (flags > environment > file) and the topic list.
//
// Lifetime: construct, Run() once on the main thread. Thread safety: all
// state lives on the io_context thread; workers and the listener only post.
#pragma once

#include <atomic>
#include <compaction/options.hpp>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "daemon/asio.hpp"
#include "daemon/config.hpp"
#include "daemon/database.hpp"
#include "daemon/http.hpp"
#include "daemon/listener.hpp"
#include "daemon/metrics.hpp"
#include "daemon/periodic.hpp"
#include "daemon/scheduler.hpp"
#include "daemon/stats_cache.hpp"
#include "daemon/worker_pool.hpp"

namespace compactiond {

class App {
 public:
  // `args` are kept to re-parse the same flags on SIGHUP.
  App(std::vector<std::string> args, Invocation invocation);
  ~App();
  App(const App&) = delete;
  App& operator=(const App&) = delete;

  // Serves until a signal stops it. Returns the process exit code.
  int Run();

 private:
  void Build();
  void BuildListener();  // listen-notify = true only
  bool StartHttp();
  void WaitForSignal();
  void OnSignal(int signal);
  void Reload();
  void Apply(Invocation fresh);
  void OnTopics(Outcome<std::vector<compaction::TopicInfo>>& outcome);
  void UpdateReady();
  HttpResponse Handle(const std::string& path);
  void PingWatchdog(Millis every);
  void BeginShutdown(int signal);
  void PollShutdown();

  const std::vector<std::string> args_;
  Invocation invocation_;
  Settings& settings_;

  asio::io_context io_;
  MetricsProbe probe_;
  asio::signal_set signals_;
  asio::steady_timer watchdog_timer_;
  asio::steady_timer shutdown_timer_;
  std::unique_ptr<WorkerPool> pool_;
  std::unique_ptr<Database> db_;
  std::unique_ptr<Scheduler> scheduler_;
  std::unique_ptr<PeriodicJob<std::vector<compaction::TopicInfo>>> topics_;
  std::unique_ptr<StatsCache> stats_;
  std::unique_ptr<HttpServer> http_;
  std::unique_ptr<TopicListener> listener_;  // null: listen-notify = false

  // The last topic listing succeeded. A listing that fails for another
  // reason than a lost connection (schema missing on a new primary, a
  // revoked privilege) clears it: every sweep would fail too.
  bool topics_loaded_ = false;
  std::string topics_error_;  // why the last listing failed, for /readyz
  bool ready_ = false;
  bool stopping_ = false;
  bool reloading_ = false;     // a reload thread is reading
  bool reload_again_ = false;  // a SIGHUP came during that read
  std::thread reload_thread_;
  std::atomic<bool> sweeps_done_{false};
  std::thread canceller_;
};

}  // namespace compactiond
