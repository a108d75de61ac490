// A statement's result: owns libpq's PGresult and reads its rows. The typed
// getters name the operation that ran the statement when a field does not
// decode, so an error says which call met it. Row and column indices are the
// caller's contract (the SQL it wrote).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

struct pg_result;  // libpq's PGresult; only pg/ includes libpq-fe.h

namespace compaction::pg {

class Result {
 public:
  Result() = default;
  // Takes ownership of `result` (null: no result). `operation` names the
  // caller in decoding errors; it must outlive the Result (a literal).
  explicit Result(pg_result* result, const char* operation = "decode")
      : result_(result), operation_(operation) {}

  explicit operator bool() const { return result_ != nullptr; }
  friend bool operator==(const Result& r, std::nullptr_t) { return !r; }

  int rows() const;
  int columns() const;
  bool IsNull(int row, int col) const;
  std::string_view Text(int row, int col) const;
  // Throws InternalError naming the operation and the column when the field
  // is not an integer.
  std::int64_t Int64(int row, int col) const;
  std::optional<std::int64_t> OptInt64(int row, int col) const;  // NULL: none
  bool Bool(int row, int col) const;
  std::string ColumnName(int col) const;
  // The rows an INSERT, UPDATE or DELETE touched (0 for other commands).
  int AffectedRows() const;
  // The command tag, e.g. "COMMIT" or "ROLLBACK".
  std::string_view CommandTag() const;

  // For pg/ only: the libpq handle.
  pg_result* get() const { return result_.get(); }
  void reset(pg_result* result = nullptr) { result_.reset(result); }
  const char* operation() const { return operation_; }
  void set_operation(const char* operation) { operation_ = operation; }

 private:
  struct Free {
    void operator()(pg_result* r) const noexcept;
  };
  std::unique_ptr<pg_result, Free> result_;
  const char* operation_ = "decode";
};

// Free forms of the getters, as the row decoders call them.
inline bool IsNull(const Result& r, int row, int col) {
  return r.IsNull(row, col);
}
inline std::string_view Text(const Result& r, int row, int col) {
  return r.Text(row, col);
}
inline std::int64_t Int64(const Result& r, int row, int col) {
  return r.Int64(row, col);
}
inline std::optional<std::int64_t> OptInt64(const Result& r, int row, int col) {
  return r.OptInt64(row, col);
}
inline bool Bool(const Result& r, int row, int col) { return r.Bool(row, col); }

}  // namespace compaction::pg
