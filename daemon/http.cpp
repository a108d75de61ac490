#include "daemon/http.hpp"

#include <algorithm>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include "daemon/log.hpp"

namespace beast = boost::beast;
namespace bhttp = boost::beast::http;

namespace compactiond {
namespace {

using Clock = std::chrono::steady_clock;
using Body = std::shared_ptr<const std::string>;

// Probes and scrapers send their request as soon as they connect: a socket
// that has not delivered complete headers by then is idle or a slowloris,
// and its slot is worth more to the next probe.
constexpr auto kFirstRequestTimeout = std::chrono::seconds(5);
// Prometheus reuses its connection between scrapes (15 s to 60 s apart);
// closing it after that only costs a reconnect, while an idle session can
// be evicted at any time anyway.
constexpr auto kKeepAliveTimeout = std::chrono::seconds(60);
// A whole response, /metrics included (about 1.7 MB at 1,000 topics): the
// same as Prometheus's default scrape timeout, after which nobody waits.
constexpr auto kWriteTimeout = std::chrono::seconds(10);
// Sessions cost a descriptor and a few kilobytes; 512 stays well below the
// usual 1,024-descriptor soft limit, with the database pool beside it.
constexpr size_t kMaxSessions = 512;
// One host (a Prometheus, a kubelet) needs a handful of connections. Above
// this a peer's new connection closes one of that peer's own sessions
// (Session::EvictBefore), so one host cannot push other hosts' sessions out
// of the global table.
// It evicts rather than refuses because every client may share one address
// (the kubelet's probes and a misbehaving scraper on the same node, or every
// client of the tests on 127.0.0.1): a refused probe would be the outage.
constexpr size_t kMaxSessionsPerPeer = 64;
constexpr size_t kMaxHeaderBytes = 8 * 1024;
// Read buffer per session: a request plus whatever pipelined bytes arrived
// with it. Pipelined requests are parsed from it one at a time, only after
// the previous response was written, so they never pile up in memory.
constexpr size_t kMaxReadBufferBytes = 16 * 1024;
// A body at most this old is served from the cache instead of re-rendered:
// a render at 1,000 topics takes ~0.1 s of CPU, and any number of scrapers
// then cost one render per second.
constexpr auto kRenderInterval = std::chrono::seconds(1);
// Writers of the cached route at once (waiting for the render or writing):
// this bounds how many copies of the body the loop pushes into sockets side
// by side; an HA pair of Prometheus servers plus a human need 3. Memory is
// bounded apart from it: a body is rendered at most once per
// kRenderInterval and a write holds it at most kWriteTimeout, so about
// eleven bodies can be alive however many sessions write them.
constexpr size_t kMaxCachedWriters = 8;
// A write whose socket has taken nothing for this long is stalled: its
// client does not read (a non-reading pipeliner, a hung scraper), or reads
// very slowly. When every slot is taken, a new scrape takes a stalled
// writer's slot; the stalled write goes on without one until its client
// reads or its deadline closes it, so a client that is only slow loses
// nothing, and eight clients that never read cannot hold /metrics at 503
// for a whole kWriteTimeout. A slotless write costs no memory of ours (the
// body is shared) and no loop time while it stalls; what it holds is its
// socket's send buffer, which any non-reading client fills anyway, with
// whatever responses it asked for.
constexpr auto kStalledWrite = std::chrono::seconds(1);
// /metrics bodies per peer address: one per this spacing (10 a second;
// Prometheus scrapes a target every 15 s or so). Copying 1.7 MB into a
// socket costs about a millisecond of the event loop: unpaced, a few
// looping scrapers would keep the loop busy copying and delay /healthz.
constexpr auto kScrapeSpacing = std::chrono::milliseconds(100);
// A scrape waits for its peer's next turn at most this long (so at most 20
// wait per peer, holding no body). One that would wait longer gets 503, but
// only after this long too: answered at once, a looping client would spin
// and keep the loop busy with thousands of 503s a second.
constexpr auto kMaxScrapeWait = std::chrono::seconds(2);
// How many idle sessions with unread bytes one eviction passes over before
// it closes the next best anyway: a probe's request is one of a few.
constexpr size_t kMaxArrivedLooks = 4;
// Evictions are logged as a count at most this often: under a flood one
// line per eviction would itself be the denial of service.
constexpr auto kEvictionLogInterval = std::chrono::seconds(10);

Body MakeBody(std::string text) {
  return std::make_shared<const std::string>(std::move(text));
}

}  // namespace

struct HttpServer::State : std::enable_shared_from_this<HttpServer::State> {
  State(asio::io_context& io_context, Handler h, HttpCachedRoute c)
      : io(io_context),
        acceptor(io_context),
        retry_timer(io_context),
        handler(std::move(h)),
        cached(std::move(c)) {}

  class Session;
  using Waiter = std::function<void(Body)>;

  void Accept();
  void Admit(asio::ip::tcp::socket socket);
  void MakeRoom(const Session& admitted);
  // The session to close first (Session::EvictBefore) among those
  // `eligible` accepts; null when none. Asks the socket of an idle one
  // whether bytes wait in it (Session::MarkArrivedRequest).
  std::shared_ptr<Session> PickVictim(
      const std::function<bool(const Session&)>& eligible);
  void Evict(const std::shared_ptr<Session>& victim, const char* reason);
  void CountEviction(const char* reason);
  void Remove(const std::shared_ptr<Session>& session);

  std::optional<Clock::duration> ReserveScrape(const asio::ip::address& peer);
  bool TakeWriterSlot();
  // Frees the slots of writes that have moved nothing for kStalledWrite.
  bool ReclaimStalledSlots();
  void ReleaseWriterSlot() { --writers; }
  void GetCached(Waiter waiter);
  void StartRender();
  void OnRendered(Body body, Clock::time_point started);

  asio::io_context& io;
  asio::ip::tcp::acceptor acceptor;
  asio::steady_timer retry_timer;  // paces accept after an error
  Handler handler;
  HttpCachedRoute cached;
  std::set<std::shared_ptr<Session>> sessions;
  std::map<asio::ip::address, size_t> per_peer;
  bool stopped = false;

  // The cached route; only the render itself runs on render_pool.
  asio::thread_pool render_pool{1};
  Body body;
  Clock::time_point rendered_at;  // when the render of `body` began
  bool rendering = false;
  std::vector<Waiter> waiters;
  size_t writers = 0;
  // Each peer's next scrape turn; entries in the past are dropped lazily.
  std::map<asio::ip::address, Clock::time_point> scrape_turn;

  size_t evictions_unlogged = 0;
  Clock::time_point last_eviction_log;
};

class HttpServer::State::Session
    : public std::enable_shared_from_this<HttpServer::State::Session> {
 public:
  Session(std::shared_ptr<State> server, asio::ip::tcp::socket socket,
          asio::ip::address peer)
      : server_(std::move(server)),
        stream_(std::move(socket)),
        peer_(std::move(peer)),
        turn_timer_(stream_.get_executor()) {}

  void Start() { ReadRequest(kFirstRequestTimeout); }
  void Close() {
    closed_ = true;
    turn_timer_.cancel();
    beast::error_code ignored;
    stream_.socket().shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
    stream_.close();
  }

  const asio::ip::address& peer() const { return peer_; }

  // Gives up this session's writer slot if its socket has taken nothing
  // since `stalled_since`; the write itself goes on.
  bool ReleaseSlotIfStalled(Clock::time_point stalled_since) {
    if (!holds_slot_ || !writing_ || last_progress_ > stalled_since) {
      return false;
    }
    ReleaseSlot();
    return true;
  }
  // Which of a peer's sessions its new connection closes first: an idle
  // one (waiting for a request: closing it loses nothing), then one stuck
  // writing to a client that does not read its responses, and only then
  // one the server keeps waiting (a scrape's turn, a render), whose client
  // did nothing wrong; within each, the one in that state the longest.
  bool EvictBefore(const Session& other) const {
    if (EvictionRank() != other.EvictionRank()) {
      return EvictionRank() < other.EvictionRank();
    }
    return since_ < other.since_;
  }

  // An idle session with bytes in its socket the loop has not read yet is
  // not idle, most likely: while the loop admits a burst of connections
  // (clients that reconnect as fast as they are evicted), a probe's request
  // can wait there behind them, and its session would be the only idle one
  // left. True when that was just found, which makes it rank as waiting
  // until ForgetArrivedRequest: for one choice of victim only, so that a
  // client dribbling a request byte by byte does not keep the mark.
  bool MarkArrivedRequest() {
    if (!idle_ || request_arrived_) return false;
    beast::error_code ec;
    request_arrived_ = stream_.socket().available(ec) > 0 && !ec;
    return request_arrived_;
  }
  void ForgetArrivedRequest() { request_arrived_ = false; }

 private:
  int EvictionRank() const {
    return idle_ && !request_arrived_ ? 0 : writing_ ? 1 : 2;
  }

  void SetIdle(bool idle) {
    idle_ = idle;
    writing_ = false;
    since_ = Clock::now();
  }

  void ReadRequest(Clock::duration timeout) {
    SetIdle(true);
    parser_.emplace();
    parser_->header_limit(kMaxHeaderBytes);
    parser_->body_limit(0);
    stream_.expires_after(timeout);
    bhttp::async_read(stream_, buffer_, *parser_,
                      [self = shared_from_this()](
                          beast::error_code ec, size_t) { self->OnRead(ec); });
  }

  void OnRead(beast::error_code ec) {
    if (ec || closed_) {
      Finish();
      return;
    }
    SetIdle(false);
    Dispatch(parser_->get());
  }

  void Dispatch(const bhttp::request<bhttp::empty_body>& req) {
    version_ = req.version();
    keep_alive_ = req.keep_alive();
    head_ = req.method() == bhttp::verb::head;
    if (req.method() != bhttp::verb::get && !head_) {
      Write(405, "text/plain; charset=utf-8", MakeBody("method not allowed\n"));
      return;
    }
    std::string path(req.target());
    path = path.substr(0, path.find('?'));
    if (!server_->cached.path.empty() && path == server_->cached.path) {
      ServeCached();
      return;
    }
    HttpResponse r = server_->handler(path);
    Write(r.status, r.content_type, MakeBody(std::move(r.body)));
  }

  // Waits for this peer's scrape turn (holding no body and no writer slot),
  // then fetches the cached body.
  void ServeCached() {
    auto wait = server_->ReserveScrape(peer_);
    if (wait && *wait <= Clock::duration::zero()) {
      FetchCached();
      return;
    }
    turn_timer_.expires_after(wait ? *wait : kMaxScrapeWait);
    turn_timer_.async_wait([self = shared_from_this(),
                            turn = wait.has_value()](beast::error_code ec) {
      if (ec || self->closed_) return;
      if (turn) {
        self->FetchCached();
        return;
      }
      static const Body busy = MakeBody("busy: too many scrapes\n");
      self->Write(503, "text/plain; charset=utf-8", busy);
    });
  }

  void FetchCached() {
    if (!server_->TakeWriterSlot()) {
      static const Body busy = MakeBody("busy: too many concurrent scrapes\n");
      Write(503, "text/plain; charset=utf-8", busy);
      return;
    }
    holds_slot_ = true;
    server_->GetCached([self = shared_from_this()](Body body) {
      if (self->closed_) {
        self->ReleaseSlot();
        return;
      }
      if (!body) {
        static const Body failed = MakeBody("metrics rendering failed\n");
        self->Write(500, "text/plain; charset=utf-8", failed);
        return;
      }
      self->Write(200, self->server_->cached.content_type, std::move(body));
    });
  }

  // A response on its way out. The body is shared with other scrapes, never
  // copied: the response only points into it, and this keeps it alive.
  // The serializer is made once the response is complete (Write).
  struct Outgoing {
    using Response = bhttp::response<bhttp::span_body<const char>>;
    Outgoing(int status, unsigned version, Body b)
        : response(static_cast<bhttp::status>(status), version),
          body(std::move(b)) {}
    Response response;
    Body body;
    std::optional<bhttp::response_serializer<bhttp::span_body<const char>>>
        serializer;
  };

  void Write(int status, const std::string& content_type, Body body) {
    auto out = std::make_shared<Outgoing>(status, version_, std::move(body));
    auto& res = out->response;
    res.set(bhttp::field::server, "compactiond");
    res.set(bhttp::field::content_type, content_type);
    res.set(bhttp::field::cache_control, "no-store");
    if (status == 503) res.set(bhttp::field::retry_after, "1");
    res.keep_alive(keep_alive_);
    res.content_length(out->body->size());
    if (!head_) {
      res.body() =
          beast::span<const char>(out->body->data(), out->body->size());
    }
    out->serializer.emplace(res);
    // One deadline for the whole response, across its partial writes.
    stream_.expires_after(kWriteTimeout);
    writing_ = true;
    since_ = last_progress_ = Clock::now();
    WriteSome(std::move(out));
  }

  // Writes in parts, so that the time of the last part written is known
  // (ReleaseSlotIfStalled).
  void WriteSome(std::shared_ptr<Outgoing> out) {
    auto& serializer = *out->serializer;
    bhttp::async_write_some(
        stream_, serializer,
        [self = shared_from_this(), out = std::move(out)](
            beast::error_code ec, size_t written) mutable {
          if (written > 0) self->last_progress_ = Clock::now();
          if (ec || self->closed_ || out->serializer->is_done()) {
            self->OnWritten(ec);
            return;
          }
          self->WriteSome(std::move(out));
        });
  }

  void OnWritten(beast::error_code ec) {
    ReleaseSlot();
    if (ec || !keep_alive_ || closed_) {
      Close();
      Finish();
      return;
    }
    ReadRequest(kKeepAliveTimeout);
  }

  void ReleaseSlot() {
    if (!holds_slot_) return;
    holds_slot_ = false;
    server_->ReleaseWriterSlot();
  }

  void Finish() { server_->Remove(shared_from_this()); }

  std::shared_ptr<State> server_;
  beast::tcp_stream stream_;
  const asio::ip::address peer_;
  beast::flat_buffer buffer_{kMaxReadBufferBytes};
  std::optional<bhttp::request_parser<bhttp::empty_body>> parser_;
  asio::steady_timer turn_timer_;  // a scrape waiting for its turn
  unsigned version_ = 11;
  bool keep_alive_ = false;
  bool head_ = false;
  bool idle_ = true;
  bool request_arrived_ = false;  // MarkArrivedRequest
  bool writing_ = false;          // a response on its way out
  bool closed_ = false;
  bool holds_slot_ = false;
  Clock::time_point since_ = Clock::now();
  Clock::time_point last_progress_ = Clock::now();  // of the current write
};

void HttpServer::State::Accept() {
  acceptor.async_accept(
      [self = shared_from_this()](beast::error_code ec,
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
        self->Admit(std::move(socket));
        self->Accept();
      });
}

void HttpServer::State::Admit(asio::ip::tcp::socket socket) {
  beast::error_code ec;
  auto remote = socket.remote_endpoint(ec);
  if (ec) return;  // already gone; the socket closes on destruction
  asio::ip::address peer = remote.address();
  auto session =
      std::make_shared<Session>(shared_from_this(), std::move(socket), peer);
  sessions.insert(session);
  ++per_peer[peer];
  session->Start();
  // Room is made once the handlers already queued have run: among them may
  // be the read of a probe's request that arrived with this connection, and
  // that session is not idle once it has run. Until then the tables hold
  // one session more than their caps.
  asio::post(io, [self = shared_from_this(), admitted = std::move(session)] {
    if (!self->stopped) self->MakeRoom(*admitted);
  });
}

// Never refuses: a refused connection may be the liveness probe, and it
// never closes the session it makes room for. Runs after `admitted` was
// counted, so a table over its cap has no room.
void HttpServer::State::MakeRoom(const Session& admitted) {
  const asio::ip::address& peer = admitted.peer();
  auto it = per_peer.find(peer);
  if (it != per_peer.end() && it->second > kMaxSessionsPerPeer) {
    Evict(PickVictim([&](const Session& s) {
            return s.peer() == peer && &s != &admitted;
          }),
          "peer");
    return;
  }
  if (sessions.size() <= kMaxSessions) return;
  // The peers holding the most sessions pay for the new one; among them
  // (with every peer at one session: among all), the session that should
  // go first, so that a tie never lands on the lowest address.
  size_t most = 0;
  for (const auto& [address, count] : per_peer) most = std::max(most, count);
  Evict(PickVictim([&](const Session& s) {
          auto count = per_peer.find(s.peer());
          return &s != &admitted && count != per_peer.end() &&
                 count->second == most;
        }),
        "global");
}

std::shared_ptr<HttpServer::State::Session> HttpServer::State::PickVictim(
    const std::function<bool(const Session&)>& eligible) {
  std::vector<std::shared_ptr<Session>> arrived;
  std::shared_ptr<Session> victim;
  for (;;) {
    victim = nullptr;
    for (const auto& s : sessions) {
      if (!eligible(*s)) continue;
      if (!victim || s->EvictBefore(*victim)) victim = s;
    }
    // One socket query per eviction in the usual case. The looks again are
    // capped: clients dribbling bytes on many idle sessions would otherwise
    // make one eviction a scan per session.
    if (!victim || arrived.size() == kMaxArrivedLooks ||
        !victim->MarkArrivedRequest()) {
      break;
    }
    arrived.push_back(victim);
  }
  for (const auto& s : arrived) s->ForgetArrivedRequest();
  return victim;
}

void HttpServer::State::Evict(const std::shared_ptr<Session>& victim,
                              const char* reason) {
  if (!victim) return;
  victim->Close();
  Remove(victim);
  CountEviction(reason);
}

void HttpServer::State::CountEviction(const char* reason) {
  ++evictions_unlogged;
  auto now = Clock::now();
  if (now - last_eviction_log < kEvictionLogInterval) return;
  LogWarn("http", "sessions evicted to admit new connections",
          {{"evicted", evictions_unlogged},
           {"last_reason", reason},
           {"sessions", sessions.size()}});
  evictions_unlogged = 0;
  last_eviction_log = now;
}

void HttpServer::State::Remove(const std::shared_ptr<Session>& session) {
  if (sessions.erase(session) == 0) return;  // already removed (evicted)
  auto it = per_peer.find(session->peer());
  if (it != per_peer.end() && --it->second == 0) per_peer.erase(it);
}

std::optional<Clock::duration> HttpServer::State::ReserveScrape(
    const asio::ip::address& peer) {
  auto now = Clock::now();
  if (scrape_turn.size() > kMaxSessions) {
    std::erase_if(scrape_turn, [now](const auto& e) { return e.second < now; });
  }
  Clock::time_point& next = scrape_turn[peer];
  Clock::time_point at = std::max(now, next);
  if (at - now > kMaxScrapeWait) return std::nullopt;
  next = at + kScrapeSpacing;
  return at - now;
}

bool HttpServer::State::TakeWriterSlot() {
  if (writers >= kMaxCachedWriters && !ReclaimStalledSlots()) return false;
  ++writers;
  return true;
}

bool HttpServer::State::ReclaimStalledSlots() {
  const Clock::time_point stalled_since = Clock::now() - kStalledWrite;
  bool reclaimed = false;
  for (const auto& s : sessions) {
    reclaimed = s->ReleaseSlotIfStalled(stalled_since) || reclaimed;
  }
  return reclaimed;
}

void HttpServer::State::GetCached(Waiter waiter) {
  if (body && Clock::now() - rendered_at < kRenderInterval) {
    waiter(body);
    return;
  }
  waiters.push_back(std::move(waiter));
  if (!rendering) StartRender();
}

// The render runs on render_pool so that /healthz never waits behind it;
// its result comes back to the io_context thread, where the cache lives.
void HttpServer::State::StartRender() {
  rendering = true;
  asio::post(render_pool, [weak = weak_from_this(), &io = io,
                           render = cached.render, started = Clock::now()] {
    Body rendered;
    try {
      rendered = MakeBody(render());
    } catch (const std::exception& e) {
      LogError("http", "rendering failed", {{"error", e.what()}});
    }
    asio::post(io, [weak, rendered = std::move(rendered), started] {
      if (auto self = weak.lock()) self->OnRendered(rendered, started);
    });
  });
}

void HttpServer::State::OnRendered(Body rendered, Clock::time_point started) {
  rendering = false;
  if (rendered) {
    body = rendered;
    rendered_at = started;
  }
  auto ready = std::move(waiters);
  waiters.clear();
  if (stopped) return;
  for (auto& w : ready) w(rendered);
}

HttpServer::HttpServer(asio::io_context& io, Handler handler,
                       HttpCachedRoute cached)
    : state_(
          std::make_shared<State>(io, std::move(handler), std::move(cached))) {}

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
  std::set<std::shared_ptr<State::Session>> sessions;
  sessions.swap(state_->sessions);
  state_->per_peer.clear();
  for (const auto& s : sessions) s->Close();
  // Waiters hold their sessions; a render in progress must not outlive
  // what it reads (the caller's metrics).
  state_->waiters.clear();
  state_->render_pool.join();
}

}  // namespace compactiond
