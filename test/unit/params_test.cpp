// pg::Params' pointers for libpq: on the stack up to eight values, on the
// heap beyond, NULLs as null pointers, in order either way.
#include <catch2/catch.hpp>
#include <string>

#include "compaction/errors.hpp"
#include "pg/exec.hpp"
#include "produce.hpp"

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

TEST_CASE("a batch's arrays must fit one protocol message together") {
  constexpr std::size_t kGiB = std::size_t{1} << 30;
  constexpr std::size_t kMiB = std::size_t{1} << 20;
  CHECK_NOTHROW(detail::CheckFitsOneMessage("ProduceBatch", {kMiB, 10}));
  CHECK_NOTHROW(
      detail::CheckFitsOneMessage("ProduceBatch", {kGiB / 2, kGiB / 4}));
  // Each array under 1 GB, together over it: the server would close the
  // connection on the Bind.
  CHECK_THROWS_AS(detail::CheckFitsOneMessage(
                      "ProduceBatch", {10 * kMiB, 5, 5, kGiB - kMiB, 2}),
                  InvalidArgument);
  CHECK_THROWS_WITH(
      detail::CheckFitsOneMessage("ProduceBatch", {kGiB / 2, kGiB / 2}),
      Catch::Contains("ProduceBatch") && Catch::Contains("split it"));
}
