// SQLSTATE to compaction::Error mapping: the one place that decides which
// error class a server or connection failure becomes. Pure, unit-tested.
#pragma once

#include <string>
#include <string_view>

namespace compaction::pg {

// Throws the error for `sqlstate` ("" when the server sent none).
// `connection_broken` is true when the connection is no longer usable,
// which makes any failure a ConnectionLost.
[[noreturn]] void ThrowForSqlState(const char* operation,
                                   std::string_view sqlstate,
                                   const std::string& message,
                                   bool connection_broken);

inline constexpr std::string_view kUniqueViolation = "23505";
inline constexpr std::string_view kUndefinedTable = "42P01";
inline constexpr std::string_view kInvalidSchemaName = "3F000";
inline constexpr std::string_view kQueryCanceled = "57014";
inline constexpr std::string_view kLockNotAvailable = "55P03";
// untranslatable_character and character_not_in_repertoire: text the
// database encoding cannot hold (or jsonb's \u0000).
inline constexpr std::string_view kUntranslatable = "22P05";
inline constexpr std::string_view kNotInRepertoire = "22021";
inline constexpr std::string_view kInsufficientPrivilege = "42501";

}  // namespace compaction::pg
