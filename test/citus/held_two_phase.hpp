#pragma once
// A multi-shard batch held between the coordinator's commit and COMMIT
// PREPARED on the workers, for the Citus tests that need that ordering
// (the commit check in library_test.cpp, the consumer's window in
// consumer_test.cpp). The coordinator waits for a synchronous standby that
// does not exist after both workers prepared; the test then cuts the
// backend's worker connections and the backend itself, so COMMIT PREPARED
// never arrives, and Citus's recovery stays off until Recover().

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "live_db.hpp"
#include "remote_commands.hpp"

namespace testing {

class HeldTwoPhase {
 public:
  // Turns the 2PC recovery off and makes commits that ask for it wait for
  // the standby "nobody"; waits until a new session sees the setting.
  explicit HeldTwoPhase(LiveDb& db) : db_(db) {
    db_.raw().Query("ALTER SYSTEM SET citus.recover_2pc_interval = -1");
    db_.raw().Query("ALTER SYSTEM SET synchronous_standby_names = 'nobody'");
    db_.raw().Query("SELECT pg_catalog.pg_reload_conf()");
    bool reloaded = false;
    while (!reloaded && !TimedOut()) {
      RawConn fresh;
      reloaded = fresh.Value("SHOW synchronous_standby_names") == "nobody";
    }
    REQUIRE(reloaded);
    for (const auto& row :
         db_.raw().Query("SELECT nodeport FROM pg_catalog.pg_dist_node "
                         "WHERE groupid > 0")) {
      workers_.push_back(std::make_unique<RawConn>("port=" + *row[0]));
    }
    REQUIRE(workers_.size() == 2);
  }

  // A client named `application_name` whose commits wait for the standby
  // (the cluster runs with synchronous_commit = off; only this client
  // waits) and whose remote commands `remote` collects.
  compaction::Client Connect(const std::string& application_name,
                             RemoteCommands& remote) {
    const char* old_options = std::getenv("PGOPTIONS");
    const std::string saved = old_options ? old_options : "";
    setenv("PGOPTIONS", (saved + " -c synchronous_commit=on").c_str(), 1);
    compaction::ClientOptions options = ClientOptionsForTests();
    options.schema = db_.schema();
    options.application_name = application_name;
    options.commit_check_timeout = std::chrono::seconds(3);
    options.pool_size = 1;
    options.notice_handler = remote.Handler();
    // Options in the conninfo replace PGOPTIONS: synchronous_commit again.
    compaction::Client client = compaction::Client::Connect(
        ClientConninfo("options='-c citus.log_remote_commands=on "
                       "-c client_min_messages=notice "
                       "-c synchronous_commit=on'"),
        options);
    setenv("PGOPTIONS", saved.c_str(), 1);
    application_name_ = application_name;
    return client;
  }

  // Whether the client's backend waits for the standby (its workers have
  // prepared and its own commit record is written).
  bool WaitForStandbyWait() {
    while (!TimedOut()) {
      if (db_.raw().Int("SELECT count(*) FROM pg_catalog.pg_stat_activity "
                        "WHERE application_name = $1 AND wait_event = "
                        "'SyncRep'",
                        {application_name_}) == 1) {
        return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }

  // Cuts the backend's connections to the workers (named by its global pid:
  // node id * 10^10 + pid; a prepared transaction outlives them) and
  // returns how many prepared transactions the workers hold.
  std::int64_t CutWorkerConnections() {
    const std::string pid = *db_.raw().Value(
        "SELECT pid FROM pg_catalog.pg_stat_activity WHERE "
        "application_name = $1",
        {application_name_});
    std::int64_t prepared = 0;
    for (auto& worker : workers_) {
      prepared +=
          worker->Int("SELECT count(*) FROM pg_catalog.pg_prepared_xacts");
      CHECK(worker->Int("SELECT count(pg_catalog.pg_terminate_backend(pid)) "
                        "FROM pg_catalog.pg_stat_activity WHERE "
                        "application_name LIKE 'citus_internal gpid=%' || "
                        "pg_catalog.lpad($1, 10, '0')",
                        {pid}) >= 1);
    }
    return prepared;
  }

  // Terminates the client's backend: its COMMIT breaks after the local
  // commit, and COMMIT PREPARED is never sent. Whether one was terminated.
  bool TerminateBackend() {
    return db_.raw().Int(
               "SELECT count(pg_catalog.pg_terminate_backend(pid)) FROM "
               "pg_catalog.pg_stat_activity WHERE application_name = $1 AND "
               "state = 'active'",
               {application_name_}) == 1;
  }

  // Commits need no standby again.
  void ReleaseStandby() {
    db_.raw().Query("ALTER SYSTEM RESET synchronous_standby_names");
    db_.raw().Query("SELECT pg_catalog.pg_reload_conf()");
  }

  // Citus's recovery commits the prepared parts; it runs on its own again.
  void Recover() {
    db_.raw().Query("SELECT pg_catalog.recover_prepared_transactions()");
    db_.raw().Query("ALTER SYSTEM RESET citus.recover_2pc_interval");
    db_.raw().Query("SELECT pg_catalog.pg_reload_conf()");
  }

  // Prepared transactions on each worker.
  std::vector<std::int64_t> PreparedPerWorker() {
    std::vector<std::int64_t> out;
    for (auto& worker : workers_) {
      out.push_back(
          worker->Int("SELECT count(*) FROM pg_catalog.pg_prepared_xacts"));
    }
    return out;
  }

 private:
  bool TimedOut() const { return std::chrono::steady_clock::now() > deadline_; }

  LiveDb& db_;
  std::vector<std::unique_ptr<RawConn>> workers_;
  std::string application_name_;
  std::chrono::steady_clock::time_point deadline_ =
      std::chrono::steady_clock::now() + std::chrono::seconds(20);
};

}  // namespace testing
