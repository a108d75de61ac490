// pg::Params' pointers for libpq: on the stack up to eight values, on the
// heap beyond, NULLs as null pointers, in order either way.
#include <catch2/catch.hpp>
#include <string>

#include "pg/exec.hpp"

using namespace compaction;

TEST_CASE("parameter pointers name every value in order, NULL as null") {
  for (int n : {0, 1, 7, 8, 9, 40}) {
    INFO(n);
    pg::Params params;
    for (int i = 0; i < n; ++i) {
      if (i % 3 == 2) {
        params.AddNull();
      } else {
        params.Add(std::string(20, static_cast<char>('a' + i % 26)));
      }
    }
    const pg::ParamPointers pointers = params.Pointers();
    for (int i = 0; i < n; ++i) {
      if (i % 3 == 2) {
        CHECK(pointers.data()[i] == nullptr);
      } else {
        REQUIRE(pointers.data()[i] != nullptr);
        CHECK(std::string(pointers.data()[i]) ==
              std::string(20, static_cast<char>('a' + i % 26)));
      }
    }
  }
}
