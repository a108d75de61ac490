// Names that are not settings: "did you mean" for a mistyped one (the one
// name close to what was given, by edit distance), and the refusal of
// COMPACTIOND_* variables that name no setting. Thread-safe.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace compactiond {

// Levenshtein distance (insertions, deletions, substitutions; a swap of two
// neighbours counts as one, as typists make it).
int EditDistance(const std::string& a, const std::string& b);

// The candidate nearest to `given` when it is close enough to be a typo
// (at most 1 edit for names up to 4 characters, 2 up to 12, 3 beyond) and
// no other candidate is as near; nullopt otherwise.
std::optional<std::string> Closest(const std::string& given,
                                   const std::vector<std::string>& candidates);

// Whether a name the user gave may be quoted in an error: only when it
// looks like a key or command word (letters, digits, '-', '_', '.'; at most
// 64). "host" of a line "host=h password=pw" is fine to show; a conninfo
// ("postgres://u:pw@h/db", "password=pw") typed where a flag or command
// was expected is not.
bool LooksLikeKey(const std::string& name);

// Whether `word` could be a command word: 1-32 of a-z and '-'. Narrower
// than LooksLikeKey, because a password typed where a command goes is
// one word with nothing around it to tell it apart, and passwords mostly
// hold a digit, a capital or a symbol.
bool LooksLikeCommandWord(const std::string& word);

// " (did you mean 'X'?)" for the setting key closest to `key`, or "".
// `format` turns the key into how the user wrote it (flag, variable).
std::string DidYouMeanSetting(const std::string& key,
                              std::string (*format)(const std::string&));

// Throws ConfigError for the first COMPACTIOND_* environment variable that
// names no setting (COMPACTIOND_CONFIG aside): silently ignored, a typo
// would leave the default in force. Only the name is quoted, never the
// value (it may be a conninfo).
void RefuseUnknownVariables();

}  // namespace compactiond
