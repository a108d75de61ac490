#include "compaction/client.hpp"

#include <thread>

#include "core.hpp"
#include "schema.hpp"
#include "tx_internal.hpp"
#include "validate.hpp"

namespace compaction {

Client::Client(std::shared_ptr<detail::ClientCore> core)
    : core_(std::move(core)) {}

Client Client::Connect(const std::string& conninfo, ClientOptions options) {
  return Connect(pg::ParseConninfo(conninfo, "Connect"), std::move(options));
}

Client Client::Connect(const std::map<std::string, std::string>& params,
                       ClientOptions options) {
  constexpr const char* kOp = "Connect";
  detail::CheckClientOptions(kOp, options);
  auto core = std::make_shared<detail::ClientCore>(params, std::move(options));
  {
    // The pool opens the first connection (its settings, notices and
    // startup options as every later one's): the server is reachable and
    // the schema, when installed, at our version.
    pg::Pool::Lease probe = core->pool().Acquire(kOp);
    // Unnamed, as before the pool opened the probe: behind a transaction
    // pooler with prepared statements on, a name prepared here can be
    // missing from the server connection the next transaction lands on
    // (pooler.mixed_session's set-up failed so, SQLSTATE 26000).
    pg::Session session = (*probe).session();
    session.cache = nullptr;
    const std::optional<int> found =
        detail::InstalledSystemVersion(*core, session, kOp);
    if (found && *found != kSystemBaselineVersion) {
      throw SchemaVersionMismatch(kOp, "schema " + core->schema(), *found,
                                  kSystemBaselineVersion);
    }
    // Back to the pool as no thread's: the first thread that needs one
    // takes it, rather than whichever thread happened to connect.
    (*probe).set_last_user(std::thread::id());
  }
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
