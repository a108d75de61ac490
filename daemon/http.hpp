// HttpServer: a small Boost.Beast HTTP/1.1 server for /metrics, /healthz and
// /readyz, hardened against clients that connect and stay silent, read slowly
// or not at all, or scrape in a tight loop (doc/security.md):
//  - a short deadline for the first request, a keep-alive idle timeout and a
//    write deadline per response;
//  - a global and a per-peer session cap that never refuse a new connection:
//    the oldest idle session (of that peer, or of the peer holding the most
//    sessions) is closed instead, so a liveness probe always gets in;
//  - one request at a time per session (no read-ahead of pipelined requests)
//    into a bounded buffer;
//  - the expensive route (/metrics) rendered on the server's own thread at
//    most once per short interval, the text shared by every scrape of that
//    interval, paced per peer address (a scrape waits briefly for its
//    peer's turn), with a bound on concurrent writers of it (503 beyond).
// Handlers of the other paths run on the io_context thread and must not
// block: they answer from state already in memory.
//
// Lifetime: create, Listen(), then keep alive until the io_context stops;
// Stop() closes the acceptor and every open connection and waits for a
// render in progress; destroy the server before whatever `render` reads.
// Thread safety: all members must be called on the io_context's thread (or
// before it runs).
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

// A route whose body is expensive to produce.
struct HttpCachedRoute {
  std::string path;  // e.g. "/metrics"; empty: no cached route
  std::string content_type;
  // Runs on the server's render thread, never on the io_context thread: it
  // must be thread-safe and must not touch io_context-owned state.
  std::function<std::string()> render;
};

class HttpServer {
 public:
  // Called with the request target path ("/healthz"); GET and HEAD only.
  using Handler = std::function<HttpResponse(const std::string& path)>;

  HttpServer(asio::io_context& io, Handler handler,
             HttpCachedRoute cached = {});
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
