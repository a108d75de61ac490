#include "pg/result.hpp"

#include <libpq-fe.h>

#include <charconv>

#include "compaction/errors.hpp"

namespace compaction::pg {

void Result::Free::operator()(pg_result* r) const noexcept { PQclear(r); }

int Result::rows() const { return result_ ? PQntuples(result_.get()) : 0; }

int Result::columns() const { return result_ ? PQnfields(result_.get()) : 0; }

bool Result::IsNull(int row, int col) const {
  return PQgetisnull(result_.get(), row, col) != 0;
}

std::string_view Result::Text(int row, int col) const {
  return {PQgetvalue(result_.get(), row, col),
          static_cast<std::size_t>(PQgetlength(result_.get(), row, col))};
}

std::string Result::ColumnName(int col) const {
  const char* name = PQfname(result_.get(), col);
  return name != nullptr ? name : std::to_string(col);
}

std::int64_t Result::Int64(int row, int col) const {
  const std::string_view text = Text(row, col);
  std::int64_t value = 0;
  const auto [ptr, ec] =
      std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || ptr != text.data() + text.size()) {
    throw InternalError(operation_,
                        "not an integer: column " + ColumnName(col));
  }
  return value;
}

std::optional<std::int64_t> Result::OptInt64(int row, int col) const {
  if (IsNull(row, col)) return std::nullopt;
  return Int64(row, col);
}

bool Result::Bool(int row, int col) const { return Text(row, col) == "t"; }

int Result::AffectedRows() const {
  const std::string_view text =
      result_ ? PQcmdTuples(result_.get()) : std::string_view();
  int value = 0;
  std::from_chars(text.data(), text.data() + text.size(), value);
  return value;  // "" (not a row count) stays 0
}

std::string_view Result::CommandTag() const {
  return result_ ? PQcmdStatus(result_.get()) : "";
}

}  // namespace compaction::pg
