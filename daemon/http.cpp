#include "daemon/http.hpp"

#include <chrono>
#include <set>

#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "daemon/log.hpp"

namespace beast = boost::beast;
namespace bhttp = boost::beast::http;

namespace compactiond {
namespace {

// Scrapers and probes send tiny requests; anything slower or bigger is a
// misbehaving client and gets cut off instead of holding a socket.
constexpr auto kIoTimeout = std::chrono::seconds(10);
constexpr size_t kMaxConnections = 64;
constexpr size_t kMaxHeaderBytes = 8 * 1024;

}  // namespace

struct HttpServer::State : std::enable_shared_from_this<HttpServer::State> {
  State(asio::io_context& io_context, Handler h)
      : io(io_context),
        acceptor(io_context),
        retry_timer(io_context),
        handler(std::move(h)) {}

  class Session;

  void Accept();

  asio::io_context& io;
  asio::ip::tcp::acceptor acceptor;
  asio::steady_timer retry_timer;  // paces accept after an error
  Handler handler;
  std::set<std::shared_ptr<Session>> sessions;
  bool stopped = false;
};

class HttpServer::State::Session
    : public std::enable_shared_from_this<HttpServer::State::Session> {
 public:
  Session(std::shared_ptr<State> server, asio::ip::tcp::socket socket)
      : server_(std::move(server)), stream_(std::move(socket)) {}

  void Start() { Read(); }
  void Close() {
    beast::error_code ignored;
    stream_.socket().shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
    stream_.close();
  }

 private:
  void Read() {
    parser_.emplace();
    parser_->header_limit(kMaxHeaderBytes);
    parser_->body_limit(0);
    stream_.expires_after(kIoTimeout);
    bhttp::async_read(stream_, buffer_, *parser_,
                      [self = shared_from_this()](beast::error_code ec,
                                                  size_t) { self->OnRead(ec); });
  }

  void OnRead(beast::error_code ec) {
    if (ec) {
      Finish();
      return;
    }
    Respond(parser_->get());
  }

  void Respond(const bhttp::request<bhttp::empty_body>& req) {
    HttpResponse r;
    if (req.method() != bhttp::verb::get && req.method() != bhttp::verb::head) {
      r = {405, "text/plain; charset=utf-8", "method not allowed\n"};
    } else {
      std::string path(req.target());
      path = path.substr(0, path.find('?'));
      r = server_->handler(path);
    }
    auto res = std::make_shared<bhttp::response<bhttp::string_body>>(
        static_cast<bhttp::status>(r.status), req.version());
    res->set(bhttp::field::server, "compactiond");
    res->set(bhttp::field::content_type, r.content_type);
    res->set(bhttp::field::cache_control, "no-store");
    res->keep_alive(req.keep_alive());
    res->body() = std::move(r.body);
    res->prepare_payload();
    if (req.method() == bhttp::verb::head) res->body().clear();
    stream_.expires_after(kIoTimeout);
    bhttp::async_write(stream_, *res,
                       [self = shared_from_this(), res](beast::error_code e,
                                                        size_t) {
                         if (e || !res->keep_alive()) {
                           self->Close();
                           self->Finish();
                           return;
                         }
                         self->Read();
                       });
  }

  void Finish() { server_->sessions.erase(shared_from_this()); }

  std::shared_ptr<State> server_;
  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::optional<bhttp::request_parser<bhttp::empty_body>> parser_;
};

void HttpServer::State::Accept() {
  acceptor.async_accept([self = shared_from_this()](
                            beast::error_code ec,
                            asio::ip::tcp::socket socket) {
    if (self->stopped) return;
    if (ec) {
      // Errors such as EMFILE persist: retrying at once would spin the
      // event loop, so wait a moment first.
      LogWarn("http", "accept failed", {{"error", ec.message()}});
      self->retry_timer.expires_after(std::chrono::milliseconds(100));
      self->retry_timer.async_wait([self](beast::error_code timer_ec) {
        if (!timer_ec && !self->stopped) self->Accept();
      });
      return;
    }
    if (self->sessions.size() >= kMaxConnections) {
      beast::error_code ignored;
      socket.close(ignored);
    } else {
      auto session = std::make_shared<Session>(self, std::move(socket));
      self->sessions.insert(session);
      session->Start();
    }
    self->Accept();
  });
}

HttpServer::HttpServer(asio::io_context& io, Handler handler)
    : state_(std::make_shared<State>(io, std::move(handler))) {}

HttpServer::~HttpServer() { Stop(); }

asio::ip::tcp::endpoint HttpServer::Listen(const std::string& host,
                                           unsigned short port) {
  asio::ip::tcp::resolver resolver(state_->io);
  // Resolution happens once at start-up, before the loop serves anything.
  auto results = resolver.resolve(host, std::to_string(port),
                                  asio::ip::tcp::resolver::passive);
  asio::ip::tcp::endpoint endpoint = results.begin()->endpoint();
  auto& acceptor = state_->acceptor;
  acceptor.open(endpoint.protocol());
  acceptor.set_option(asio::socket_base::reuse_address(true));
  acceptor.bind(endpoint);
  acceptor.listen(asio::socket_base::max_listen_connections);
  state_->Accept();
  return acceptor.local_endpoint();
}

void HttpServer::Stop() {
  if (!state_ || state_->stopped) return;
  state_->stopped = true;
  beast::error_code ignored;
  state_->retry_timer.cancel();
  state_->acceptor.close(ignored);
  auto sessions = std::move(state_->sessions);
  for (const auto& s : sessions) s->Close();
}

}  // namespace compactiond
