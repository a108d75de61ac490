#pragma once

#include <optional>

#include "core.hpp"

namespace compaction::detail {

// The recorded system baseline version; nullopt when the schema is not
// installed, 0 when installed without a version row.
std::optional<int> InstalledSystemVersion(ClientCore& core,
                                          pg::Session session,
                                          const char* operation);
void InstallSchema(ClientCore& core);

}  // namespace compaction::detail
