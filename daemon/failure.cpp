#include "daemon/failure.hpp"

#include <compaction/errors.hpp>

namespace compactiond {

bool IsConnectionError(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const compaction::ConnectionLost&) {
    return true;
  } catch (const compaction::CommitOutcomeUnknown&) {
    return true;
  } catch (...) {
    // The library maps every connection-class SQLSTATE to ConnectionLost.
    return false;
  }
}

std::optional<std::string> RefusedRole(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const compaction::AuthenticationFailed& e) {
    return e.role();
  } catch (...) {
    return std::nullopt;
  }
}

bool IsCancelled(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const compaction::StatementCancelled&) {
    return true;
  } catch (...) {
    return false;
  }
}

bool IsTransient(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const compaction::StatementCancelled&) {
    return true;
  } catch (const compaction::LockTimeout&) {
    return true;
  } catch (const compaction::RetryableError&) {
    return true;
  } catch (...) {
    return false;
  }
}

std::string Describe(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const compaction::ConnectionLost& e) {
    return std::string("ConnectionLost: ") + e.what();
  } catch (const compaction::CommitOutcomeUnknown& e) {
    return std::string("CommitOutcomeUnknown: ") + e.what();
  } catch (const compaction::TopicNotFound& e) {
    return std::string("TopicNotFound: ") + e.what();
  } catch (const compaction::SchemaVersionMismatch& e) {
    return std::string("SchemaVersionMismatch: ") + e.what();
  } catch (const compaction::InvalidArgument& e) {
    return std::string("InvalidArgument: ") + e.what();
  } catch (const compaction::AuthenticationFailed& e) {
    return std::string("AuthenticationFailed: ") + e.what();
  } catch (const compaction::DatabaseError& e) {
    return "DatabaseError " + e.sqlstate() + ": " + e.what();
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "unknown error";
  }
}

}  // namespace compactiond
