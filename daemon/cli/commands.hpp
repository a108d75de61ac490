// The one-shot subcommands' handlers, which the command table (table.cpp)
// calls with the flags read (`run` is the App). Each connects, does its
// work, prints to stdout and returns an exit code (cli.hpp); errors
// propagate as exceptions for RunCommandLine to map.
//
// Thread safety: call from the main thread, one at a time.
#pragma once

#include <compaction/options.hpp>
#include <string>
#include <vector>

#include "daemon/config.hpp"

namespace compactiond::cli {

// sweep --once: every topic's headless sweep, then its log cleaner.
int SweepOnce(const Settings& s);
// stats [--json]
int Stats(const Settings& s, bool json);
// topic list [--json]
int TopicList(const Settings& s, bool json);
// topic register NAME... with --headless-ttl, --retention and
// --tombstone-retention in `config`.
int TopicRegister(const Settings& s, const std::vector<std::string>& names,
                  const compaction::TopicConfig& config);
// topic destroy NAME (after --yes): drops the topic and its tables. Needs
// the role that owns them; another gets the server's permission error.
int TopicDestroy(const Settings& s, const std::string& name);
// topic tail TOPIC [--from-start] [--heads-only] [--json]: prints messages
// as they commit until SIGINT or SIGTERM; keeps no position.
int TopicTail(const Settings& s, const std::string& topic, bool from_start,
              bool heads_only, bool json);
// consumer list [--json]: every topic's consumers with their lag.
int ConsumerList(const Settings& s, bool json);
// consumer reset TOPIC NAME --to-start|--to-end
int ConsumerReset(const Settings& s, const std::string& topic,
                  const std::string& name, bool to_end);
// consumer drop TOPIC NAME: needs the owner role (no other may delete
// positions); another gets the server's error with that said.
int ConsumerDrop(const Settings& s, const std::string& topic,
                 const std::string& name);
// schema install [--roles [--role-prefix P]]
int SchemaInstall(const Settings& s, bool roles,
                  const std::string& role_prefix);

}  // namespace compactiond::cli
