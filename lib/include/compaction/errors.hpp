// The one error hierarchy of libcompaction. Each class tells the caller what
// to do next; messages name the operation and never carry passwords or
// payloads.
//
//   Error
//   ├── UsageError             the calling code misused the API (a bug there):
//   │                          a moved-from Tx, committing a borrowed or
//   │                          finished one
//   ├── InvalidArgument        fix the input; raised before anything is written
//   ├── TopicNotFound          register the topic first (or check its name)
//   ├── SchemaVersionMismatch  the database was installed by another version,
//   │   │                      or not at all (not_installed())
//   │   └── SchemaProfileMismatch  installed for one PostgreSQL, running on
//   │                          Citus, or the other way round
//   ├── MessageDecodeError     a stored payload does not decode into the type
//   │   └── MessageSchemaVersionMismatch  stored vs compiled schema version
//   ├── PoolTimeout            no pooled connection freed up in time
//   ├── ConnectionLost         the connection broke; the transaction is gone
//   ├── CommitOutcomeUnknown   the connection broke during COMMIT
//   ├── InternalError          the server answered what the library cannot
//   │                          have asked for: a library bug, or its tables
//   │                          altered by hand
//   └── DatabaseError          any other server error, with its SQLSTATE
//       ├── AuthenticationFailed  the server refused the role at connect
//       │                      (28P01, 28000): the password, pg_hba.conf or
//       │                      the role itself; retrying cannot help
//       ├── LockTimeout        lock_timeout expired (55P03)
//       ├── RetryableError     serialization failure or deadlock: retry the tx
//       └── StatementCancelled the statement was cancelled (57014):
//                              statement_timeout or a cancel request from
//                              outside (a sweep that Janitor::Cancel stops
//                              returns with `cancelled` set instead)
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

#include "compaction/export.hpp"

namespace compaction {

class COMPACTION_EXPORT Error : public std::runtime_error {
 public:
  Error(std::string operation, const std::string& message);
  // The library operation that failed, e.g. "LockCompactionHead".
  const std::string& operation() const noexcept { return operation_; }

 private:
  std::string operation_;
};

// Like std::logic_error: retrying cannot help, the calling code must change.
class COMPACTION_EXPORT UsageError : public Error {
 public:
  using Error::Error;
};

class COMPACTION_EXPORT InvalidArgument : public Error {
 public:
  using Error::Error;
};

class COMPACTION_EXPORT TopicNotFound : public Error {
 public:
  TopicNotFound(std::string operation, const std::string& topic_name);
  const std::string& topic_name() const noexcept { return topic_name_; }

 private:
  std::string topic_name_;
};

class COMPACTION_EXPORT SchemaVersionMismatch : public Error {
 public:
  SchemaVersionMismatch(std::string operation, const std::string& subject,
                        int found, int expected);
  // The version is this build's, but the baseline's fingerprint (a hash of
  // its SQL text) is not: another build of this version created the
  // database. found() == expected() == version. `found_fingerprint` is
  // what the database records (empty: none).
  SchemaVersionMismatch(std::string operation, const std::string& subject,
                        int version, const std::string& found_fingerprint,
                        const std::string& expected_fingerprint);
  int found() const noexcept { return found_; }
  int expected() const noexcept { return expected_; }
  // The schema (or the system baseline in it) is absent: install it
  // (Client::InstallSchema) rather than recreate the database.
  bool not_installed() const noexcept { return found_ == 0; }

 protected:
  struct Detail {
    std::string message;
  };
  SchemaVersionMismatch(std::string operation, Detail detail, int found,
                        int expected);

 private:
  int found_;
  int expected_;
};

// The schema holds the layout of one deployment profile ("single": one
// PostgreSQL; "citus": distributed over a Citus cluster) but the database
// is of the other: the citus extension was created after the schema was
// installed, or is gone. The layouts differ (doc/citus.md), so nothing
// runs; install into a new schema or recreate the database.
// found() == expected() == the baseline version.
class COMPACTION_EXPORT SchemaProfileMismatch : public SchemaVersionMismatch {
 public:
  SchemaProfileMismatch(std::string operation, const std::string& subject,
                        int version, std::string installed_profile,
                        std::string database_profile);
  const std::string& installed_profile() const noexcept {
    return installed_profile_;
  }
  const std::string& database_profile() const noexcept {
    return database_profile_;
  }

 private:
  std::string installed_profile_;
  std::string database_profile_;
};

class COMPACTION_EXPORT MessageDecodeError : public Error {
 public:
  MessageDecodeError(std::string operation, std::int64_t message_id,
                     const std::string& reason);
  std::int64_t message_id() const noexcept { return message_id_; }

 private:
  std::int64_t message_id_;
};

class COMPACTION_EXPORT MessageSchemaVersionMismatch
    : public MessageDecodeError {
 public:
  MessageSchemaVersionMismatch(std::string operation, std::int64_t message_id,
                               int stored_version, int expected_version);
  int stored_version() const noexcept { return stored_version_; }
  int expected_version() const noexcept { return expected_version_; }

 private:
  int stored_version_;
  int expected_version_;
};

// Every pooled connection stayed busy for ClientOptions::acquire_timeout;
// often a thread holding Txs that then waits for one more connection.
class COMPACTION_EXPORT PoolTimeout : public Error {
 public:
  using Error::Error;
};

class COMPACTION_EXPORT ConnectionLost : public Error {
 public:
  using Error::Error;
};

class COMPACTION_EXPORT CommitOutcomeUnknown : public Error {
 public:
  using Error::Error;
};

class COMPACTION_EXPORT InternalError : public Error {
 public:
  using Error::Error;
};

// DatabaseError::sqlstate() of a statement the role may not run
// (insufficient_privilege), e.g. a role of doc/roles.md doing what its
// role is not granted.
inline constexpr std::string_view kInsufficientPrivilege = "42501";

// DatabaseError::sqlstate() of a Poll or TopicTail that found transaction
// ids this server has not handed out yet (object_not_in_prerequisite_state):
// a consumer position or a message written by another cluster, copied here
// by a logical dump or logical replication. Such ids mean nothing here, and
// reading on would skip messages for good, so nothing is delivered and no
// position moves until the cluster's ids are past them (doc/operations.md,
// "Moving a database"). The server uses the same SQLSTATE for other
// states (a currval before any nextval, for one); a Poll or TopicTail
// raises it itself only for this. A TopicTail also raises it when the
// server is behind its position in memory (after a failover or a crash).
inline constexpr std::string_view kTransactionIdsAhead = "55000";

class COMPACTION_EXPORT DatabaseError : public Error {
 public:
  DatabaseError(std::string operation, std::string sqlstate,
                const std::string& message);
  // Five-character SQLSTATE, e.g. "23505".
  const std::string& sqlstate() const noexcept { return sqlstate_; }

 private:
  std::string sqlstate_;
};

// The server refused to let `role` in: a wrong or missing password
// (sqlstate 28P01), or pg_hba.conf admits no such connection, or the role
// does not exist or may not log in (28000). Not a ConnectionLost: the same
// credentials fail the same way, so fix them rather than retry. The message
// names the role and the reason, never the password. libpq reports a
// refused connection without its SQLSTATE, so the class is recognised by
// the server's message, which is English unless the server's lc_messages
// says otherwise (then the failure stays a ConnectionLost).
class COMPACTION_EXPORT AuthenticationFailed : public DatabaseError {
 public:
  AuthenticationFailed(std::string operation, std::string sqlstate,
                       std::string role, const std::string& message);
  const std::string& role() const noexcept { return role_; }

 private:
  std::string role_;
};

class COMPACTION_EXPORT LockTimeout : public DatabaseError {
 public:
  using DatabaseError::DatabaseError;
};

// sqlstate() is 40001 or 40P01; 40001 too when LockCompactionHead lost
// its key row to concurrent deletes too many times in a row.
class COMPACTION_EXPORT RetryableError : public DatabaseError {
 public:
  using DatabaseError::DatabaseError;
};

class COMPACTION_EXPORT StatementCancelled : public DatabaseError {
 public:
  using DatabaseError::DatabaseError;
};

}  // namespace compaction
