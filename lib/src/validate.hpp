// Input validation. Every check runs before anything is written and throws
// InvalidArgument naming what was wrong.
#pragma once

#include <chrono>
#include <string>

namespace compaction {
struct ClientOptions;
}

namespace compaction::detail {

// Topic names: 1..kMaxTopicNameLength of [a-z0-9._-], starting with a
// lowercase letter or digit.
inline constexpr std::size_t kMaxTopicNameLength = 100;
// Message keys: 1..kMaxMessageKeyBytes bytes of valid UTF-8 without NUL
// (the key is a btree primary key; PostgreSQL limits index rows to ~2.7 kB).
inline constexpr std::size_t kMaxMessageKeyBytes = 1024;
inline constexpr int kMaxPageSize = 10000;

void ValidateTopicName(const char* operation, const std::string& name);
// Consumer names follow the topic-name rules.
void ValidateConsumerName(const char* operation, const std::string& name);
void ValidateMessageKey(const char* operation, const std::string& key);
void ValidateHeadlessTtl(const char* operation, std::chrono::milliseconds ttl);
// 0..kMaxTtl or kKeepForever, else InvalidArgument naming `what`.
void ValidateRetention(const char* operation, const char* what,
                       std::chrono::milliseconds retention);
// What is wrong with a TTL ("must be in 1..N ms ..., got X ms"), or empty.
std::string TtlProblem(std::chrono::milliseconds ttl);
// What is wrong with a server-side timeout, or empty.
std::string ServerTimeoutProblem(std::chrono::milliseconds timeout);
// A positive duration of at most kMaxTtl, else InvalidArgument naming `what`.
void ValidateTtl(const char* operation, const char* what,
                 std::chrono::milliseconds ttl);
// A server-side timeout (lock_timeout, statement_timeout): positive and at
// most PostgreSQL's limit of INT_MAX milliseconds (about 24.8 days).
void ValidateServerTimeout(const char* operation, const char* what,
                           std::chrono::milliseconds timeout);
void ValidateLimit(const char* operation, const char* what, int limit, int max);
bool IsValidUtf8(const std::string& text);

// What Client::Connect takes: a positive acquire_timeout, a pool_size of at
// least 1, a schema name of 1..63 bytes of UTF-8 without NUL, and
// session_settings as ClientOptions documents them. Throws InvalidArgument
// naming what was wrong (a setting by its name, never by its value).
void CheckClientOptions(const char* operation, const ClientOptions& options);

}  // namespace compaction::detail
