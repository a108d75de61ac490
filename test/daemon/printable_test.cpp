// cli::Printable: what the CLI's tables print of text from the database.
#include <catch2/catch.hpp>
#include <string>

#include "daemon/cli/common.hpp"

using compactiond::cli::Printable;

TEST_CASE("Printable escapes control characters and keeps UTF-8 text") {
  CHECK(Printable("plain topic-1.x") == "plain topic-1.x");
  CHECK(Printable("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80") ==
        "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
  CHECK(Printable("\x1b[2J\x1b[31mFAKE\r\nother 1h\t0") ==
        "\\x1b[2J\\x1b[31mFAKE\\r\\nother 1h\\t0");
  CHECK(Printable(std::string("a\0b\x07\x7f", 5)) == "a\\x00b\\x07\\x7f");
  // C1 controls as UTF-8 (U+009B is CSI) and as lone bytes.
  CHECK(Printable("\xc2\x9b\x33\x31m") == "\\xc2\\x9b31m");
  CHECK(Printable("\x9b\x33\x31m") == "\\x9b31m");
  // Not UTF-8: truncated, overlong, a surrogate.
  CHECK(Printable("\xc3") == "\\xc3");
  CHECK(Printable("\xc0\xaf") == "\\xc0\\xaf");
  CHECK(Printable("\xed\xa0\x80") == "\\xed\\xa0\\x80");
  // A backslash is escaped too, so "\\x1b" in the data reads differently
  // from an escaped ESC.
  CHECK(Printable("\\x1b") == "\\\\x1b");
}
