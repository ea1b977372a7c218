// SPDX-License-Identifier: Apache-2.0
#include "server.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <limits>

#include "commhost/errors.h"
#include "commhost/sdk/option_schema.h"
#include "protocol.h"

namespace commhost::tcpstore {

using boost::asio::ip::tcp;

namespace {
constexpr size_t kInitialBuffer = 4096;
constexpr size_t kKeepBuffer = 64 * 1024;  // a bigger buffer is given back once its frame is handled
}  // namespace

struct Server::Connection {
  Connection(tcp::socket s, std::atomic<int>& open) : socket(std::move(s)), open(open) {
    open.fetch_add(1, std::memory_order_relaxed);
    boost::system::error_code ec;
    const auto ep = socket.remote_endpoint(ec);
    peer = ec ? "unknown peer" : ep.address().to_string() + ":" + std::to_string(ep.port());
  }
  ~Connection() { open.fetch_sub(1, std::memory_order_release); }
  tcp::socket socket;
  std::atomic<int>& open;
  std::string peer;
  // Bytes received and not yet handled: in[0, filled). Reading whole chunks rather than
  // header then body saves a syscall and an event-loop turn per request.
  std::vector<uint8_t> in = std::vector<uint8_t>(kInitialBuffer);
  size_t filled = 0;
  size_t want = kHeaderSize;  // bytes the frame being received needs in all (header first)
  std::vector<uint8_t> out;   // the reply being written
  bool authenticated = false;
  bool closed = false;
  // Closes a connection that is silent mid-frame (or before auth). `timerGeneration`
  // tells a stale expiry (the frame completed, a new one started) from a live one.
  std::unique_ptr<boost::asio::steady_timer> timer;
  bool timerArmed = false;
  uint64_t timerGeneration = 0;
};

struct Server::Waiter {
  ConnectionPtr connection;
  std::vector<std::string> keys;
  std::function<void()> ready;
  std::unique_ptr<boost::asio::steady_timer> timer;
  std::string parkedUnder;  // the missing key whose waiters_ list holds this waiter
  bool done = false;
};

namespace {

using Clock = std::chrono::steady_clock;
constexpr std::chrono::seconds kLogInterval(10);
// Accept errors that only time cures (out of fds or kernel memory): retrying at once
// spins, so the acceptor waits this long between tries.
constexpr std::chrono::milliseconds kAcceptBackoff(100);

bool resourceExhausted(const boost::system::error_code& ec) {
  const int v = ec.value();
  return ec.category() == boost::system::system_category() &&
         (v == EMFILE || v == ENFILE || v == ENOBUFS || v == ENOMEM);
}

int listenBacklog() {
  std::ifstream in("/proc/sys/net/core/somaxconn");
  int n = 0;
  if (in >> n && n > 0) return n;
  return SOMAXCONN;
}

std::vector<uint8_t> statusFrame(Status s) { return FrameWriter().u8(static_cast<uint8_t>(s)).finish(); }

std::vector<uint8_t> errorFrame(const std::string& message) {
  return FrameWriter().u8(static_cast<uint8_t>(Status::Error)).str(message).finish();
}

std::string refusedOverCap(int maxConnections) {
  return "the server is at max_connections " + std::to_string(maxConnections) +
         "; raise the store's max_connections option (store.options.max_connections) or reduce the clients "
         "connected to it";
}

}  // namespace

Server::Server(ServerOptions options) : options_(std::move(options)), acceptor_(io_), acceptRetry_(io_) {
  boost::system::error_code ec;
  const auto address = boost::asio::ip::make_address(options_.bind, ec);
  if (ec)
    throw StoreError("tcp store: bind address '" + options_.bind + "' is not an IP address; set store.options.bind");
  const tcp::endpoint endpoint(address, static_cast<unsigned short>(options_.port));
  acceptor_.open(endpoint.protocol(), ec);
  if (!ec) acceptor_.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) acceptor_.bind(endpoint, ec);
  if (!ec) acceptor_.listen(listenBacklog(), ec);
  if (ec)
    throw StoreError("tcp store: cannot listen on " + options_.bind + ":" + std::to_string(options_.port) + ": " +
                     ec.message() +
                     ". Another job may hold the port: pick another (MASTER_PORT or store.options.port)");
  port_ = acceptor_.local_endpoint().port();
  accept();
  thread_ = std::thread([this] { io_.run(); });
}

Server::~Server() {
  const auto until = std::chrono::steady_clock::now() + options_.linger;
  while (connections_.load(std::memory_order_acquire) > 0 && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  io_.stop();
  if (thread_.joinable()) thread_.join();
  uint64_t total = 0;
  std::string byOp;
  for (size_t op = 0; op < served_.size(); ++op) {
    if (!served_[op]) continue;
    total += served_[op];
    byOp += std::string(byOp.empty() ? "" : ", ") + opName(static_cast<Op>(op)) + " " + std::to_string(served_[op]);
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - started_).count();
  if (options_.logger && total)
    options_.logger->info("store server on " + options_.bind + ":" + std::to_string(port_) + ": " +
                          std::to_string(total) + " requests in " +
                          formatDuration(std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000))) + " (" +
                          std::to_string(static_cast<uint64_t>(total / std::max(seconds, 1e-3))) + "/s): " + byOp +
                          "; " + std::to_string(data_.size()) + " keys held at the end");  // the loop has ended
}

void Server::logLimited(RateLimited& r, const std::string& message) {
  ++r.count;
  const auto now = Clock::now();
  if (r.last != Clock::time_point{} && now - r.last < kLogInterval) return;
  if (options_.logger)
    options_.logger->warn(message + " [" + std::to_string(r.count) + " time" + (r.count == 1 ? "" : "s") +
                          " since the last such line; at most one per " + formatDuration(kLogInterval) + "]");
  r.last = now;
  r.count = 0;
}

void Server::accept() {
  acceptor_.async_accept([this](boost::system::error_code ec, tcp::socket socket) {
    if (ec == boost::asio::error::operation_aborted) return;
    if (ec) return acceptFailed(ec);
    if (acceptFailures_ > 0 && options_.logger)
      options_.logger->warn("tcp store: accepting connections again after " + std::to_string(acceptFailures_) +
                            " failed accepts");
    acceptFailures_ = 0;
    if (connections_.load(std::memory_order_relaxed) >= options_.maxConnections) {
      boost::system::error_code ignored;
      const auto ep = socket.remote_endpoint(ignored);
      logLimited(refused_, "tcp store: refusing connection from " +
                               (ignored ? std::string("unknown peer") : ep.address().to_string()) + ": " +
                               std::to_string(options_.maxConnections) +
                               " connections are open (store option max_connections); raise it if the job "
                               "needs more, or find the client that opens so many");
      // The client reads this as the answer to its handshake, so it can say why instead
      // of guessing from a closed connection. One small frame into a fresh socket's send
      // buffer: written at once, without blocking the loop. Its unread handshake makes
      // the close a reset, but the kernel hands the client this frame before the reset.
      socket.non_blocking(true, ignored);
      boost::asio::write(socket, boost::asio::buffer(errorFrame(refusedOverCap(options_.maxConnections))), ignored);
      socket.close(ignored);
    } else {
      socket.set_option(tcp::no_delay(true), ec);
      auto c = std::make_shared<Connection>(std::move(socket), connections_);
      c->authenticated = options_.token.empty();
      c->timer = std::make_unique<boost::asio::steady_timer>(io_);
      if (!c->authenticated) armTimer(c, options_.authTimeout, "authenticate (store option auth_timeout)");
      next(c);
    }
    accept();
  });
}

void Server::acceptFailed(const boost::system::error_code& ec) {
  ++acceptFailures_;
  const bool exhausted = resourceExhausted(ec);
  logLimited(acceptErrors_,
             "tcp store: cannot accept a connection: " + ec.message() + " (" +
                 std::to_string(connections_.load(std::memory_order_relaxed)) + " connections open" +
                 (exhausted ? "; the process is out of file descriptors or memory: raise `ulimit -n`, or lower "
                              "store option max_connections below it; retrying every " +
                                  formatDuration(kAcceptBackoff)
                            : "") +
                 ")");
  if (!exhausted) return accept();
  acceptRetry_.expires_after(kAcceptBackoff);
  acceptRetry_.async_wait([this](boost::system::error_code timerEc) {
    if (!timerEc && acceptor_.is_open()) accept();
  });
}

void Server::armTimer(const ConnectionPtr& c, std::chrono::milliseconds limit, const std::string& what) {
  c->timerArmed = true;
  const uint64_t generation = ++c->timerGeneration;
  c->timer->expires_after(limit);
  c->timer->async_wait([this, c, generation, limit, what](boost::system::error_code ec) {
    if (ec || c->closed || !c->timerArmed || c->timerGeneration != generation) return;
    drop(c, "did not " + what + " within " + formatDuration(limit) + " (" + std::to_string(c->filled) + " of " +
                std::to_string(c->want) + " bytes of a frame received)");
  });
}

void Server::read(const ConnectionPtr& c) {
  // Grow toward the frame's length only as its bytes arrive: a header claiming a huge
  // frame costs nothing until the bytes are really sent.
  if (c->filled == c->in.size()) c->in.resize(std::max(c->filled + 1, std::min(c->in.size() * 2, c->want)));
  c->socket.async_read_some(boost::asio::buffer(c->in.data() + c->filled, c->in.size() - c->filled),
                            [this, c](boost::system::error_code ec, size_t n) {
                              if (ec) {  // the client closed its connection: nothing to report
                                c->closed = true;
                                c->timer->cancel();
                                return;
                              }
                              c->filled += n;
                              next(c);
                            });
}

// Handles the next complete frame in the buffer, or reads more. One request at a time:
// the following one is looked at only after this one's reply is written.
void Server::next(const ConnectionPtr& c) {
  try {
    if (c->closed) return;
    c->want = kHeaderSize;
    if (c->filled < kHeaderSize) return more(c);
    const uint32_t length = parseHeader(c->in.data(), std::numeric_limits<uint32_t>::max());
    if (!c->authenticated && length > kMaxAuthBody)
      return drop(c, "unauthenticated client's first frame claims " + std::to_string(length) +
                         " bytes; it must be an auth frame of at most " + std::to_string(kMaxAuthBody) +
                         " (the client needs the store's auth_token)");
    if (length > options_.maxFrame)
      throw ProtocolError("frame of " + std::to_string(length) + " bytes is over the limit of " +
                          std::to_string(options_.maxFrame) + " (store option max_frame)");
    const size_t frame = kHeaderSize + length;
    c->want = frame;
    if (c->filled < frame) return more(c);
    Request request = decodeRequest(c->in.data() + kHeaderSize, length);
    std::memmove(c->in.data(), c->in.data() + frame, c->filled - frame);
    c->filled -= frame;
    c->timerArmed = false;  // this frame is complete; an unauthenticated one is auth or dropped
    c->timer->cancel();
    // A big frame's buffer is not kept for the connection's lifetime.
    if (c->in.size() > kKeepBuffer && c->filled <= kInitialBuffer) {
      std::vector<uint8_t> small(kInitialBuffer);
      std::memcpy(small.data(), c->in.data(), c->filled);
      c->in.swap(small);
    }
    handle(c, std::move(request));
  } catch (const ProtocolError& e) {
    drop(c, e.what());
  }
}

// Reads more of the frame being received; a frame under way must complete in time.
void Server::more(const ConnectionPtr& c) {
  if (c->filled > 0 && !c->timerArmed)
    armTimer(c, options_.frameTimeout, "complete a frame (store option frame_timeout)");
  read(c);
}

void Server::drop(const ConnectionPtr& c, const std::string& reason) {
  if (c->closed) return;
  c->closed = true;
  c->timer->cancel();
  if (options_.logger) options_.logger->warn("tcp store: closing connection from " + c->peer + ": " + reason);
  boost::system::error_code ec;
  c->socket.shutdown(tcp::socket::shutdown_both, ec);
  c->socket.close(ec);
}

void Server::refuse(const ConnectionPtr& c, const std::string& reason, const std::string& hint) {
  const std::string message = reason + "; " + hint;
  c->timerArmed = false;
  c->out = errorFrame(message);
  boost::asio::async_write(c->socket, boost::asio::buffer(c->out),
                           [this, c, message](boost::system::error_code, size_t) { drop(c, message); });
}

void Server::reply(const ConnectionPtr& c, std::vector<uint8_t> frame) {
  c->out = std::move(frame);
  boost::asio::async_write(c->socket, boost::asio::buffer(c->out), [this, c](boost::system::error_code ec, size_t) {
    if (!ec) next(c);
  });
}

bool Server::present(const std::vector<std::string>& keys) const {
  for (const auto& k : keys)
    if (!data_.count(k)) return false;
  return true;
}

void Server::waitFor(const ConnectionPtr& c, std::vector<std::string> keys, uint64_t timeoutMs,
                     std::function<void()> ready) {
  if (present(keys)) return ready();
  auto w = std::make_shared<Waiter>();
  w->connection = c;
  w->keys = std::move(keys);
  w->ready = std::move(ready);
  w->timer = std::make_unique<boost::asio::steady_timer>(io_, std::chrono::milliseconds(timeoutMs));
  w->timer->async_wait([this, w](boost::system::error_code ec) {
    if (ec || w->done) return;
    w->done = true;
    auto& list = waiters_[w->parkedUnder];
    list.erase(std::remove(list.begin(), list.end(), w), list.end());
    if (list.empty()) waiters_.erase(w->parkedUnder);
    FrameWriter f;
    f.u8(static_cast<uint8_t>(Status::Timeout));
    std::vector<std::string> missing;
    for (const auto& k : w->keys)
      if (!data_.count(k)) missing.push_back(k);
    f.strings(missing);
    reply(w->connection, f.finish());
  });
  park(w);
}

// Parks `w` under its first missing key; returns false when none is missing.
bool Server::park(const std::shared_ptr<Waiter>& w) {
  for (const auto& k : w->keys)
    if (!data_.count(k)) {
      waiters_[k].push_back(w);
      w->parkedUnder = k;
      return true;
    }
  return false;
}

void Server::changed(const std::string& key) {
  auto it = waiters_.find(key);
  if (it == waiters_.end()) return;
  auto parked = std::move(it->second);
  waiters_.erase(it);
  for (auto& w : parked) {
    if (w->done || park(w)) continue;
    w->done = true;
    w->timer->cancel();
    w->ready();
  }
}

void Server::handle(const ConnectionPtr& c, Request r) {
  if (!c->authenticated && r.op != Op::Auth)
    return drop(c, std::string("unauthenticated ") + opName(r.op) +
                       " request; the first frame must be auth (the client needs the store's auth_token)");
  auto ok = [] { return FrameWriter().u8(static_cast<uint8_t>(Status::Ok)); };
  const std::string key = r.keys.empty() ? std::string() : r.keys[0];
  ++served_[static_cast<size_t>(r.op) % served_.size()];
  switch (r.op) {
    case Op::Auth:
      if (!options_.token.empty() && r.token != options_.token)
        return refuse(c,
                      r.token.empty() ? "unauthenticated client: it sent no auth token and this server requires one"
                                      : "wrong auth token (not logged)",
                      "check auth_token / COMMHOST_STORE_TOKEN on both sides");
      c->authenticated = true;
      return reply(c, statusFrame(Status::Ok));
    case Op::Set:
      data_[key] = std::move(r.values[0]);
      changed(key);
      return reply(c, statusFrame(Status::Ok));
    case Op::Get:
      return waitFor(c, {key}, r.timeoutMs, [this, c, key, ok] { reply(c, ok().bytes(data_[key]).finish()); });
    case Op::Add: {
      int64_t sum = r.delta;
      auto it = data_.find(key);
      if (it != data_.end()) {
        try {
          sum += counterValue(key, it->second);
        } catch (const InvalidArgument& e) {
          return reply(c, errorFrame(e.what()));
        }
      }
      data_[key] = toBytes(std::to_string(sum));
      changed(key);
      return reply(c, ok().u64(static_cast<uint64_t>(sum)).finish());
    }
    case Op::CompareSet: {
      const Bytes& expected = r.values[0];
      const Bytes& desired = r.values[1];
      auto it = data_.find(key);
      if (it == data_.end()) {
        if (!expected.empty()) return reply(c, ok().bytes(expected).finish());
        data_[key] = desired;
        changed(key);
        return reply(c, ok().bytes(desired).finish());
      }
      if (it->second == expected) {
        it->second = desired;
        changed(key);
      }
      return reply(c, ok().bytes(it->second).finish());
    }
    case Op::Wait: return waitFor(c, std::move(r.keys), r.timeoutMs, [this, c] { reply(c, statusFrame(Status::Ok)); });
    case Op::Check: return reply(c, ok().u8(present(r.keys) ? 1 : 0).finish());
    case Op::Delete: return reply(c, ok().u8(data_.erase(key) ? 1 : 0).finish());
    case Op::NumKeys: return reply(c, ok().u64(data_.size()).finish());
    case Op::MultiGet: {
      const auto wanted = r.keys;
      return waitFor(c, std::move(r.keys), r.timeoutMs, [this, c, wanted, ok] {
        FrameWriter f = ok();
        f.u64(wanted.size());
        for (const auto& k : wanted) f.bytes(data_[k]);
        reply(c, f.finish());
      });
    }
    case Op::MultiSet:
      for (size_t i = 0; i < r.keys.size(); ++i) data_[r.keys[i]] = std::move(r.values[i]);
      for (const auto& k : r.keys) changed(k);
      return reply(c, statusFrame(Status::Ok));
    case Op::Append: {
      Bytes& slot = data_[key];
      slot.insert(slot.end(), r.values[0].begin(), r.values[0].end());
      changed(key);
      return reply(c, statusFrame(Status::Ok));
    }
    case Op::Ping: return reply(c, statusFrame(Status::Ok));
  }
}

}  // namespace commhost::tcpstore
