// The one way daemon code includes Boost.Asio and Boost.Beast.
//
// Boost 1.74's Asio uses std::exchange without including <utility>, which g++
// 12 rejects under -std=c++20 unless <utility> comes first.
#pragma once

// Not sorted by clang-format, which would put <utility> last.
// clang-format off
#include <utility>

#include <boost/asio.hpp>
#include <boost/asio/steady_timer.hpp>
// clang-format on

namespace compactiond {
namespace asio = boost::asio;
}  // namespace compactiond
