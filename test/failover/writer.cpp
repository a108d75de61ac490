// The application side of the failover test: writer threads that lock a
// key's head and produce head + 1 in one transaction (increments), and
// producer threads with autocommit produces, on a multi-host conninfo,
// until SIGTERM. Every outcome is counted: acknowledged, ConnectionLost
// (retried: it did not commit), CommitOutcomeUnknown. Then it checks on the
// (new) primary that no acknowledged write is missing and that every key's
// log is exactly 1..head (each committed increment counted once), and
// prints one JSON summary line on stdout. A consumer thread polls the
// topic all along; once every writer has stopped, the consumer reads to
// the end on the new primary (Drain), and every message in the log must
// have been delivered, with no Poll refused for transaction ids ahead of
// the server's (a promoted standby continues the primary's ids).
//
//   failover_writer CONNINFO SCHEMA TOPIC INCREMENTERS PRODUCERS KEYS
#include <libpq-fe.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <iostream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "compaction/compaction.hpp"
#include "live_db.hpp"

using compaction::Client;
using compaction::CommitOutcomeUnknown;
using compaction::ConnectionLost;
using testing::Counter;

namespace {

std::atomic<bool> g_stop{false};
void OnSignal(int) { g_stop = true; }

struct Tally {
  std::mutex mutex;
  std::map<std::string, std::int64_t> acked;    // per increment key
  std::map<std::string, std::int64_t> unknown;  // per increment key
  // Acknowledged autocommit produces: (id, key, created_at us).
  std::vector<std::tuple<std::int64_t, std::string, std::int64_t>> produced;
  std::int64_t produce_unknown = 0;
  std::atomic<std::int64_t> lost{0};
  std::atomic<std::int64_t> other_errors{0};
  std::atomic<std::int64_t> notices{0};
  std::string last_other;
  // Ids a Poll delivered in a transaction that committed, or whose outcome
  // is unknown (it may have).
  std::set<std::int64_t> consumed;
  std::atomic<std::int64_t> polls_ahead{0};  // kTransactionIdsAhead
};

void Pause() { std::this_thread::sleep_for(std::chrono::milliseconds(20)); }

void OtherError(Tally& tally, const std::exception& e) {
  ++tally.other_errors;
  std::lock_guard lock(tally.mutex);
  tally.last_other = e.what();
}

void Incrementer(Client& client, const std::string& topic_name,
                 const std::string& key, Tally& tally) {
  auto topic = client.Topic<Counter>(topic_name);
  auto handle = topic.Key(key);
  std::optional<compaction::Producer<Counter>> producer;
  while (!g_stop) {
    try {
      if (!producer) producer.emplace(topic.RegisterProducer());
      compaction::Tx tx = client.Begin();
      auto head = handle.LockCompactionHead(tx);
      const std::int64_t next = head ? head->message.value + 1 : 1;
      producer->ProduceInTx(tx, Counter{next}, testing::Compacted(key));
      tx.Commit();
      std::lock_guard lock(tally.mutex);
      ++tally.acked[key];
    } catch (const CommitOutcomeUnknown&) {
      std::lock_guard lock(tally.mutex);
      ++tally.unknown[key];
    } catch (const ConnectionLost&) {
      ++tally.lost;
      Pause();
    } catch (const compaction::Error& e) {
      OtherError(tally, e);
      Pause();
    }
  }
}

void Producer(Client& client, const std::string& topic_name, int index,
              Tally& tally) {
  auto topic = client.Topic<Counter>(topic_name);
  std::optional<compaction::Producer<Counter>> producer;
  std::int64_t n = 0;
  while (!g_stop) {
    const std::string key =
        "p" + std::to_string(index) + "-" + std::to_string(n);
    try {
      if (!producer) producer.emplace(topic.RegisterProducer());
      compaction::ProduceOptions options;
      options.message_key = key;
      const compaction::ProduceResult r =
          producer->Produce(Counter{n}, options);
      std::lock_guard lock(tally.mutex);
      tally.produced.emplace_back(
          r.id, key,
          std::chrono::duration_cast<std::chrono::microseconds>(
              r.created_at.time_since_epoch())
              .count());
      ++n;
    } catch (const CommitOutcomeUnknown&) {
      std::lock_guard lock(tally.mutex);
      ++tally.produce_unknown;
      ++n;  // stored or not, the next one gets a key of its own
    } catch (const ConnectionLost&) {
      ++tally.lost;  // did not commit: the same message again
      Pause();
    } catch (const compaction::Error& e) {
      OtherError(tally, e);
      Pause();
    }
  }
}

// One Poll in a transaction of its own: how many it delivered, or -1 when
// it failed (counted in the tally).
int PollOnce(Client& client, compaction::Consumer<Counter>& consumer,
             Tally& tally) {
  std::vector<std::int64_t> ids;
  try {
    compaction::Tx tx = client.Begin();
    for (const auto& d : consumer.Poll(tx)) ids.push_back(d.id);
    tx.Commit();
  } catch (const CommitOutcomeUnknown&) {
    // It may have committed: its deliveries count (a redelivery repeats
    // them, which the set absorbs).
  } catch (const ConnectionLost&) {
    ++tally.lost;
    return -1;
  } catch (const compaction::DatabaseError& e) {
    if (e.sqlstate() == compaction::kTransactionIdsAhead) ++tally.polls_ahead;
    OtherError(tally, e);
    return -1;
  } catch (const compaction::Error& e) {
    OtherError(tally, e);
    return -1;
  }
  std::lock_guard lock(tally.mutex);
  tally.consumed.insert(ids.begin(), ids.end());
  return static_cast<int>(ids.size());
}

void Poller(Client& client, const std::string& topic_name, Tally& tally) {
  auto consumer = client.Topic<Counter>(topic_name).Consumer("failover");
  while (!g_stop) {
    if (PollOnce(client, consumer, tally) <= 0) Pause();
  }
}

// After every writer has stopped: reads to the end on whatever the
// conninfo reaches now, within 30 s; a refusal ends it at once.
void Drain(Client& client, const std::string& topic_name, Tally& tally) {
  auto consumer = client.Topic<Counter>(topic_name).Consumer("failover");
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < deadline &&
         tally.polls_ahead == 0) {
    const int got = PollOnce(client, consumer, tally);
    if (got == 0) return;
    if (got < 0) Pause();
  }
}

// Rows of `sql` on a fresh connection to the (new) primary.
std::vector<std::vector<std::string>> Query(const std::string& conninfo,
                                            const std::string& sql) {
  PGconn* conn = PQconnectdb(conninfo.c_str());
  PQsetNoticeProcessor(
      conn, [](void*, const char*) {}, nullptr);
  PGresult* r = PQexec(conn, sql.c_str());
  std::vector<std::vector<std::string>> rows;
  if (PQresultStatus(r) != PGRES_TUPLES_OK) {
    std::cerr << "verify query failed: " << PQerrorMessage(conn) << "\n";
  }
  for (int i = 0; i < PQntuples(r); ++i) {
    std::vector<std::string> row;
    for (int j = 0; j < PQnfields(r); ++j)
      row.emplace_back(PQgetvalue(r, i, j));
    rows.push_back(std::move(row));
  }
  PQclear(r);
  PQfinish(conn);
  return rows;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 7) {
    std::cerr << "usage: failover_writer CONNINFO SCHEMA TOPIC INCREMENTERS "
                 "PRODUCERS KEYS\n";
    return 2;
  }
  const std::string conninfo = argv[1], schema = argv[2], topic = argv[3];
  const int incrementers = std::stoi(argv[4]), producers = std::stoi(argv[5]),
            keys = std::stoi(argv[6]);
  std::signal(SIGTERM, OnSignal);
  std::signal(SIGINT, OnSignal);
  Tally tally;
  compaction::ClientOptions options;
  options.schema = schema;
  options.pool_size = incrementers + producers + 2;
  options.application_name = "failover_writer";
  options.commit_check_timeout = std::chrono::seconds(15);
  options.notice_handler = [&](const compaction::Notice&) { ++tally.notices; };
  Client client = Client::Connect(conninfo, options);
  std::vector<std::thread> threads;
  for (int i = 0; i < incrementers; ++i) {
    threads.emplace_back(Incrementer, std::ref(client), topic,
                         "k" + std::to_string(i % keys), std::ref(tally));
  }
  for (int i = 0; i < producers; ++i) {
    threads.emplace_back(Producer, std::ref(client), topic, i, std::ref(tally));
  }
  threads.emplace_back(Poller, std::ref(client), topic, std::ref(tally));
  std::cerr << "writer: running\n";
  for (auto& t : threads) t.join();
  Drain(client, topic, tally);

  // Verification on whatever the conninfo reaches now.
  const std::string table =
      "\"" + schema + "\".message_" +
      Query(conninfo, "SELECT id FROM \"" + schema + "\".topic WHERE name = '" +
                          topic + "'")
          .at(0)
          .at(0);
  std::set<std::tuple<std::int64_t, std::string, std::int64_t>> stored;
  for (const auto& row : Query(conninfo,
                               "SELECT id, message_key, (extract(epoch FROM "
                               "created_at) * 1e6)::bigint FROM " +
                                   table + " WHERE message_key LIKE 'p%'")) {
    stored.emplace(std::stoll(row[0]), row[1], std::stoll(row[2]));
  }
  // Every message still in the log (the cleaner may have removed
  // superseded ones) was delivered.
  std::int64_t not_consumed = 0;
  for (const auto& row : Query(conninfo, "SELECT id FROM " + table)) {
    not_consumed += tally.consumed.count(std::stoll(row[0])) == 0;
  }
  std::int64_t lost_produces = 0;
  for (const auto& p : tally.produced) lost_produces += stored.count(p) == 0;
  nlohmann::json keys_json = nlohmann::json::object();
  std::int64_t bad_keys = 0, acked_total = 0, unknown_total = 0;
  for (int k = 0; k < keys; ++k) {
    const std::string key = "k" + std::to_string(k);
    std::vector<std::int64_t> values;
    for (const auto& row : Query(
             conninfo, "SELECT payload->>'value' FROM " + table +
                           " WHERE message_key = '" + key + "' ORDER BY id")) {
      values.push_back(std::stoll(row[0]));
    }
    const std::int64_t final_value = static_cast<std::int64_t>(values.size());
    bool sequence_ok = true;  // exactly 1..n, each once
    for (std::size_t i = 0; i < values.size(); ++i) {
      sequence_ok =
          sequence_ok && values[i] == static_cast<std::int64_t>(i + 1);
    }
    const std::int64_t acked = tally.acked[key], unknown = tally.unknown[key];
    const bool ok =
        sequence_ok && acked <= final_value && final_value <= acked + unknown;
    bad_keys += !ok;
    acked_total += acked;
    unknown_total += unknown;
    keys_json[key] = {{"acked", acked},
                      {"unknown", unknown},
                      {"final", final_value},
                      {"sequence_ok", sequence_ok}};
  }
  nlohmann::json out = {{"increments_acked", acked_total},
                        {"increments_unknown", unknown_total},
                        {"produces_acked", tally.produced.size()},
                        {"produces_unknown", tally.produce_unknown},
                        {"produces_lost", lost_produces},
                        {"bad_keys", bad_keys},
                        {"connection_lost_retried", tally.lost.load()},
                        {"other_errors", tally.other_errors.load()},
                        {"last_other_error", tally.last_other},
                        {"notices", tally.notices.load()},
                        {"consumed", tally.consumed.size()},
                        {"not_consumed", not_consumed},
                        {"polls_ahead", tally.polls_ahead.load()},
                        {"keys", keys_json}};
  std::cout << out.dump() << std::endl;
  return (lost_produces == 0 && bad_keys == 0 && not_consumed == 0 &&
          tally.polls_ahead == 0)
             ? 0
             : 1;
}
