// Backend CPU per batched message of produce_batch_<id>, for comparing two
// versions of the function side by side in one session (RESULTS.md, "Batch
// server cost (issue 26)"). Not part of the build:
//
//   g++ -std=c++20 -O2 -Ilib/include -I"$(pg_config --includedir)"
//     test/bench/batch_server_cpu.cpp build/lib/libcompaction.a -lpq
//     -o /tmp/batch_server_cpu          (one command line)
//   /tmp/batch_server_cpu SCHEMA setup TOPIC...       # register, 10,000 heads
//   /tmp/batch_server_cpu SCHEMA ROUNDS CALLS TOPIC...
//   /tmp/batch_server_cpu SCHEMA produce|lock ROUNDS CALLS TOPIC...
//
// setup registers each topic (installing the schema first) and gives it
// 10,000 keys with a head each, as the bench's batch section does. A run
// calls each topic's produce_batch_<id> CALLS times per round with 100
// compacted messages (random keys of the 10,000, rank 0, {"value":1}),
// alternating the topics' order round by round, and prints per topic the
// median over rounds of the session's on-CPU time per message, read from
// /proc/<backend pid>/schedstat (so the server must run on this machine).
// produce and lock instead make each of the 100 messages of a call one
// produce_<id> (autocommit) or one lock_<id> (in BEGIN .. COMMIT) of a
// random key, the single-key paths that read the same head rows.
#include <libpq-fe.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "compaction/compaction.hpp"

namespace {

constexpr int kBatch = 100;
constexpr int kKeys = 10000;

PGresult* Run(PGconn* c, const std::string& sql) {
  PGresult* r = PQexec(c, sql.c_str());
  const ExecStatusType s = PQresultStatus(r);
  if (s != PGRES_COMMAND_OK && s != PGRES_TUPLES_OK) {
    std::fprintf(stderr, "%s: %s", sql.c_str(), PQerrorMessage(c));
    std::exit(1);
  }
  return r;
}

std::string Value(PGconn* c, const std::string& sql) {
  PGresult* r = Run(c, sql);
  std::string v = PQgetvalue(r, 0, 0);
  PQclear(r);
  return v;
}

double OnCpuNs(const std::string& pid) {
  std::ifstream f("/proc/" + pid + "/schedstat");
  double ns = 0;
  f >> ns;
  return ns;
}

std::string Repeat(const std::string& item) {
  std::string out = "{";
  for (int i = 0; i < kBatch; ++i) out += (i ? "," : "") + item;
  return out + "}";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s SCHEMA setup|ROUNDS [CALLS] TOPIC...\n",
                 argv[0]);
    return 2;
  }
  const std::string schema = argv[1];
  PGconn* c = PQconnectdb("");
  if (PQstatus(c) != CONNECTION_OK) {
    std::fprintf(stderr, "%s", PQerrorMessage(c));
    return 1;
  }
  const std::string q = "\"" + schema + "\"";
  auto id_of = [&](const std::string& topic) {
    const std::string sql = "SELECT id FROM " + q + ".topic WHERE name = $1";
    const char* value = topic.c_str();
    PGresult* r =
        PQexecParams(c, sql.c_str(), 1, nullptr, &value, nullptr, nullptr, 0);
    if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1) {
      std::fprintf(stderr, "no topic %s in %s\n", value, q.c_str());
      std::exit(1);
    }
    std::string id = PQgetvalue(r, 0, 0);
    PQclear(r);
    return id;
  };
  if (std::string(argv[2]) == "setup") {
    auto client = compaction::Client::Connect(
        "", compaction::ClientOptions{schema, 1, "batch-server-cpu"});
    client.InstallSchema();
    for (int i = 3; i < argc; ++i) {
      client.Topic<compaction::RawMessage>(argv[i]).Register();
      const std::string id = id_of(argv[i]);
      const std::string msg = q + ".message_" + id;
      const std::string head = q + ".compaction_head_" + id;
      PQclear(Run(c, "WITH m AS (INSERT INTO " + msg +
                         " (message_key, schema_version, compaction_rank, "
                         "payload, partition) SELECT i::text, 1, 0, "
                         "'{\"value\": 0}', 0 FROM generate_series(1, " +
                         std::to_string(kKeys) +
                         ") i RETURNING id, message_key) INSERT INTO " + head +
                         " (message_key, head_id, schema_version, "
                         "compaction_rank, idle_since) SELECT message_key, id, "
                         "1, 0, NULL FROM m"));
      for (const std::string& t : {head, msg}) {
        PQclear(
            Run(c, "ALTER TABLE " + t + " SET (autovacuum_enabled = false)"));
        PQclear(Run(c, "VACUUM ANALYZE " + t));
      }
    }
    return 0;
  }
  // produce / lock: the single-key paths that read the same head rows,
  // each message its own transaction as the library runs them.
  const std::string mode =
      std::string(argv[2]) == "produce" || std::string(argv[2]) == "lock"
          ? argv[2]
          : "batch";
  const int arg = mode == "batch" ? 2 : 3;
  const int rounds = std::stoi(argv[arg]);
  const int calls = std::stoi(argv[arg + 1]);
  std::vector<std::string> topics(argv + arg + 2, argv + argc);
  const std::string pid = Value(c, "SELECT pg_backend_pid()");
  for (std::size_t t = 0; t < topics.size(); ++t) {
    const std::string id = id_of(topics[t]);
    const std::string sql =
        mode == "produce"
            ? "SELECT p.message_id, p.message_created_at, p.advanced FROM " +
                  q + ".produce_" + id + "($1, 1, 0, '{\"value\":1}') p"
        : mode == "lock"
            ? "SELECT l.status, l.id, l.payload FROM " + q + ".lock_" + id +
                  "($1, false) l"
            : "SELECT p.message_id, p.message_created_at, p.advanced FROM " +
                  q + ".produce_batch_" + id +
                  "($1::text[], $2::integer[], $3::bigint[], $4::jsonb[], "
                  "$5::text[]) p";
    PQclear(PQprepare(c, ("s" + std::to_string(t)).c_str(), sql.c_str(),
                      mode == "batch" ? 5 : 1, nullptr));
  }
  const std::string versions = Repeat("1"), ranks = Repeat("0"),
                    payloads = Repeat("\"{\\\"value\\\":1}\"");
  std::mt19937_64 rng(42);
  std::vector<std::vector<double>> us(topics.size());
  for (int round = 0; round < rounds; ++round) {
    for (std::size_t k = 0; k < topics.size(); ++k) {
      const std::size_t t = round % 2 ? topics.size() - 1 - k : k;
      const std::string name = "s" + std::to_string(t);
      const double before = OnCpuNs(pid);
      for (int call = 0; call < calls; ++call) {
        if (mode != "batch") {
          for (int i = 0; i < kBatch; ++i) {
            const std::string key = std::to_string(
                std::uniform_int_distribution<int>(1, kKeys)(rng));
            const char* value = key.c_str();
            if (mode == "lock") PQclear(Run(c, "BEGIN"));
            PGresult* r =
                PQexecPrepared(c, name.c_str(), 1, &value, nullptr, nullptr, 0);
            if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1) {
              std::fprintf(stderr, "%s: %s", topics[t].c_str(),
                           PQerrorMessage(c));
              return 1;
            }
            PQclear(r);
            if (mode == "lock") PQclear(Run(c, "COMMIT"));
          }
          continue;
        }
        // The keys, and those drawn twice (as the library names them).
        std::string keys = "{", repeated = "{";
        std::map<int, int> drawn;
        for (int i = 0; i < kBatch; ++i) {
          const int k = std::uniform_int_distribution<int>(1, kKeys)(rng);
          keys += (i ? ",\"" : "\"") + std::to_string(k) + "\"";
          if (++drawn[k] == 2) {
            repeated +=
                (repeated.size() > 1 ? ",\"" : "\"") + std::to_string(k) + "\"";
          }
        }
        keys += "}";
        repeated += "}";
        const char* values[5] = {keys.c_str(), versions.c_str(), ranks.c_str(),
                                 payloads.c_str(), repeated.c_str()};
        PGresult* r =
            PQexecPrepared(c, name.c_str(), 5, values, nullptr, nullptr, 0);
        if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != kBatch) {
          std::fprintf(stderr, "%s: %s", topics[t].c_str(), PQerrorMessage(c));
          return 1;
        }
        PQclear(r);
      }
      us[t].push_back((OnCpuNs(pid) - before) / calls / kBatch / 1000.0);
    }
  }
  for (std::size_t t = 0; t < topics.size(); ++t) {
    std::sort(us[t].begin(), us[t].end());
    std::printf("%-12s backend CPU us/message: median %.2f [%.2f-%.2f]\n",
                topics[t].c_str(), us[t][us[t].size() / 2], us[t].front(),
                us[t].back());
  }
  PQfinish(c);
  return 0;
}
