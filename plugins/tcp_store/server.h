// SPDX-License-Identifier: Apache-2.0
// The tcp store server: one Boost.Asio event loop on its own thread holds every key and
// every connection. All state below is touched only by that thread, so it needs no lock
// (connections_ alone is also read by ~Server, hence atomic).
//
// A malformed, oversized or unauthenticated frame closes that one connection with a
// logged reason; everyone else keeps being served. Waits (get, wait, multi_get) park on
// the server and are answered when their keys appear or their timeout passes.
//
// Memory a peer can make the server hold is bounded by what it actually sends: a frame's
// buffer grows as its bytes arrive, never to the length its header claims. When a token
// is set, a connection's first frame must be a small auth frame (kMaxAuthBody), so an
// unauthenticated connection holds a few KiB at most, max_connections of them in total.
// A frame that stops arriving is dropped after frame_timeout; a connection that does not
// authenticate within auth_timeout is closed.
#pragma once

#include <boost/asio.hpp>

#include <array>
#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "commhost/logging.h"
#include "commhost/store.h"
#include "protocol.h"

namespace commhost::tcpstore {

struct ServerOptions {
  std::string bind = "127.0.0.1";
  int port = 0;       // 0: pick a free port; see Server::port()
  std::string token;  // "" disables authentication
  uint32_t maxFrame = 64u << 20;
  int maxConnections = 4096;  // more are accepted and closed at once, with a log line
  std::chrono::milliseconds authTimeout{std::chrono::seconds(10)};   // token set: auth within this
  std::chrono::milliseconds frameTimeout{std::chrono::seconds(60)};  // a started frame completes within this
  // How long ~Server keeps serving while other clients are still connected: a rank that
  // finishes (or fails) first must not take the job's control plane down with it.
  std::chrono::milliseconds linger{0};
  std::shared_ptr<Logger> logger;
};

class Server {
 public:
  // Binds and starts serving; throws StoreError naming the address when it cannot bind.
  explicit Server(ServerOptions options);
  ~Server();  // serves up to options.linger while clients remain, then closes everything
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  int port() const { return port_; }
  const std::string& address() const { return options_.bind; }

 private:
  struct Connection;
  struct Waiter;
  using ConnectionPtr = std::shared_ptr<Connection>;

  // Logs at most once per kLogInterval; `count` is how often it happened meanwhile.
  struct RateLimited {
    std::chrono::steady_clock::time_point last{};
    uint64_t count = 0;
  };
  void logLimited(RateLimited& r, const std::string& message);

  void accept();
  void acceptFailed(const boost::system::error_code& ec);
  void armTimer(const ConnectionPtr& c, std::chrono::milliseconds limit, const std::string& what);
  void read(const ConnectionPtr& c);
  void more(const ConnectionPtr& c);
  void next(const ConnectionPtr& c);
  void handle(const ConnectionPtr& c, Request request);
  void reply(const ConnectionPtr& c, std::vector<uint8_t> frame);
  void drop(const ConnectionPtr& c, const std::string& reason);
  // Answers the handshake with an error frame saying why, then drops the connection.
  void refuse(const ConnectionPtr& c, const std::string& reason, const std::string& hint);
  // Calls `ready` once every key exists, or answers Timeout after `timeoutMs`.
  void waitFor(const ConnectionPtr& c, std::vector<std::string> keys, uint64_t timeoutMs, std::function<void()> ready);
  bool park(const std::shared_ptr<Waiter>& w);
  void changed(const std::string& key);
  bool present(const std::vector<std::string>& keys) const;

  ServerOptions options_;
  std::atomic<int> connections_{0};  // open connections; written by the loop, read by ~Server
  boost::asio::io_context io_;
  boost::asio::ip::tcp::acceptor acceptor_;
  int port_ = 0;
  // Loop thread only:
  std::map<std::string, Bytes> data_;
  std::map<std::string, std::vector<std::shared_ptr<Waiter>>> waiters_;  // by a key each waits for
  boost::asio::steady_timer acceptRetry_;
  uint64_t acceptFailures_ = 0;  // since the last successful accept
  RateLimited acceptErrors_, refused_;
  // Requests handled, by Op (index = its value), for the line ~Server logs: what an
  // operator needs to size the store (calls/s per rank). Read by ~Server after the join.
  std::array<uint64_t, 16> served_{};
  std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
  std::thread thread_;
};

}  // namespace commhost::tcpstore
