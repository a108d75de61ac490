// HttpServer: a small Boost.Beast HTTP/1.1 server for /metrics, /healthz and
// /readyz. Handlers run on the io_context thread and must not block: they
// answer from state already in memory.
//
// Lifetime: create, Listen(), then keep alive until the io_context stops;
// Stop() closes the acceptor and every open connection. Thread safety: all
// members must be called on the io_context's thread (or before it runs).
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "daemon/asio.hpp"

namespace compactiond {

struct HttpResponse {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
};

class HttpServer {
 public:
  // Called with the request target path ("/metrics"); GET and HEAD only.
  using Handler = std::function<HttpResponse(const std::string& path)>;

  HttpServer(asio::io_context& io, Handler handler);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds HOST:PORT (port 0: any free port) and starts accepting. Returns the
  // bound endpoint. Throws boost::system::system_error.
  asio::ip::tcp::endpoint Listen(const std::string& host, unsigned short port);
  void Stop();

 private:
  struct State;
  std::shared_ptr<State> state_;
};

}  // namespace compactiond
