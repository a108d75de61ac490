#include "compaction/client.hpp"

#include "core.hpp"
#include "schema.hpp"
#include "tx_internal.hpp"

namespace compaction {

Client::Client(std::shared_ptr<detail::ClientCore> core)
    : core_(std::move(core)) {}

Client Client::Connect(const std::string& conninfo, ClientOptions options) {
  return Connect(pg::ParseConninfo(conninfo, "Connect"), std::move(options));
}

Client Client::Connect(const std::map<std::string, std::string>& params,
                       ClientOptions options) {
  constexpr const char* kOp = "Connect";
  if (options.acquire_timeout.count() <= 0) {
    throw InvalidArgument(kOp, "acquire_timeout must be positive");
  }
  if (options.pool_size < 1) {
    throw InvalidArgument(kOp, "pool_size must be at least 1, got " +
                                   std::to_string(options.pool_size));
  }
  if (options.schema.empty()) throw InvalidArgument(kOp, "schema is empty");
  if (options.schema.size() > 63) {
    throw InvalidArgument(kOp, "schema name is longer than 63 bytes");
  }
  // Without prepared statements: as the pool's connections (pg::Pool::startup),
  // settings per transaction; refused options fail here, before any I/O.
  const std::string local_settings = options.prepared_statements
                                         ? std::string()
                                         : pg::LocalSettingsSql(params, kOp);
  pg::ConnPtr first = pg::Connect(
      params, options.application_name, kOp, &options.notice_handler,
      options.prepared_statements ? pg::StartupOptions::kSend
                                  : pg::StartupOptions::kPerTransaction);
  std::string quoted = pg::QuoteIdentifier(first.get(), options.schema, kOp);
  auto core = std::make_shared<detail::ClientCore>(params, std::move(options),
                                                   std::move(quoted));
  // `options` is moved from: the core's copy lives as long as the pool.
  pg::RouteNotices(first.get(), &core->options().notice_handler);
  const std::optional<int> found = detail::InstalledSystemVersion(
      *core, pg::Session{first.get(), nullptr, &local_settings}, kOp);
  if (found && *found != kSystemBaselineVersion) {
    throw SchemaVersionMismatch(kOp, "schema " + core->schema(), *found,
                                kSystemBaselineVersion);
  }
  core->pool().Adopt(
      std::move(first));  // the probe serves as a pooled connection
  return Client(std::move(core));
}

void Client::InstallSchema() { detail::InstallSchema(*core_); }

void Client::InstallRoles(const std::string& role_prefix) {
  detail::InstallRoles(*core_, role_prefix);
}

Tx Client::Begin() { return detail::BeginTx(*core_); }

const ClientOptions& Client::options() const { return core_->options(); }

namespace detail {

std::optional<TopicInfo> ClientCore::CachedTopic(const std::string& name) {
  std::lock_guard lock(cache_mutex_);
  auto it = topics_.find(name);
  if (it == topics_.end()) return std::nullopt;
  return it->second;
}

void ClientCore::CacheTopic(const TopicInfo& topic) {
  std::lock_guard lock(cache_mutex_);
  topics_.insert_or_assign(topic.name, topic);
}

void ClientCore::ForgetTopic(const std::string& name) {
  std::lock_guard lock(cache_mutex_);
  topics_.erase(name);
}

}  // namespace detail
}  // namespace compaction
