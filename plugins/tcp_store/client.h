// SPDX-License-Identifier: Apache-2.0
// The tcp store client: blocking TCP connections to one server.
//
// Threading: a client may be shared by threads. Each call borrows an idle connection (or
// opens one), so calls from different threads run at once: a thread blocked in wait()
// does not hold up another thread's set() (the supervisor's heartbeat shares the
// application's store). Connections are kept for reuse; there are at most as many as
// calls ever ran at once.
// Errors: a server that cannot be reached within the timeout, that turns the connection
// away (wrong token, max_connections: its reason is read from the handshake's answer),
// or that goes away during a call, gives StoreError naming the rank, op, key, host:port
// and what to check; never a hang. A wait past its timeout gives TimeoutError. Until the
// server is reached, a warning every progressEvery says so ("still waiting for the store
// at host:port") and a StoreWaiting launch report goes to `commhost run`, which names the
// ranks that never reached it (StoreReached / StoreGaveUp follow).
// Once reached, a server that refuses a new connection (ECONNREFUSED; a second thread's
// call needs one) has exited: the client tries for kReconnectWindow at most, not the
// whole timeout (other connect errors, a timeout or an unreachable network, may pass and
// get the whole timeout), so a rank whose store died fails in seconds (the heartbeat names the lost
// peer) instead of retrying for minutes while its collectives hang.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "commhost/errors.h"
#include "commhost/logging.h"
#include "commhost/mutex.h"
#include "commhost/sdk/launch_report.h"
#include "commhost/store.h"
#include "protocol.h"

namespace commhost::tcpstore {

struct ClientOptions {
  std::string host = "127.0.0.1";
  int port = 0;
  std::string token;
  std::chrono::milliseconds timeout{std::chrono::seconds(300)};
  uint32_t maxFrame = 64u << 20;
  int rank = -1;  // named in error messages when known
  // While the server cannot be reached, a progress line every this often (0: none).
  std::chrono::milliseconds progressEvery{std::chrono::seconds(5)};
  std::shared_ptr<Logger> logger;  // for the progress lines; none: they are not printed
  LaunchReportFn reportLaunch;     // the progress as launch reports; null: none sent
};

class Client final : public StoreBase {
 public:
  static constexpr std::chrono::milliseconds kReconnectWindow{std::chrono::seconds(2)};
  // Connects (retrying with backoff until the timeout) and authenticates. `keepAlive`
  // is released after the connection closes (the in-process server, if any).
  Client(ClientOptions options, std::shared_ptr<void> keepAlive = nullptr);
  ~Client() override;

  using Store::wait;
  void set(const std::string& key, const Bytes& value) override;
  Bytes get(const std::string& key) override;
  int64_t add(const std::string& key, int64_t delta) override;
  Bytes compareSet(const std::string& key, const Bytes& expected, const Bytes& desired) override;
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  bool check(const std::vector<std::string>& keys) override;
  bool deleteKey(const std::string& key) override;
  int64_t numKeys() override;
  std::vector<Bytes> multiGet(const std::vector<std::string>& keys) override;
  void multiSet(const std::vector<std::string>& keys, const std::vector<Bytes>& values) override;
  void append(const std::string& key, const Bytes& value) override;
  void ping();

  const std::string& where() const { return where_; }

 private:
  // Sends one request and returns the whole answer frame (header, status, fields).
  // Waits up to `serverWait` for the server's answer (plus a grace for the network).
  std::vector<uint8_t> call(const Request& request, std::chrono::milliseconds serverWait);
  int connectWithRetry();  // returns a connected, authenticated socket
  // Sends a launch report about reaching the store, `start` being when the wait began.
  void reportLaunch(LaunchEvent event, std::chrono::steady_clock::time_point start, const std::string& text,
                    const std::string& hint) const;
  void handshake(int fd);  // closes `fd` and throws StoreError with the server's reason when refused
  int borrow();            // an idle connection, or a new one
  void giveBack(int fd);
  [[noreturn]] void lost(const Request& request, const std::string& what);
  // Names this client's rank and, for a request, its op and (single) key.
  ErrorContext context(const Request* request = nullptr) const;

  std::shared_ptr<void> keepAlive_;  // declared first: released last
  ClientOptions options_;
  std::string where_;  // "host:port"
  Mutex idleMutex_;
  std::vector<int> idle_ GUARDED_BY(idleMutex_);  // connected sockets no call is using
  std::atomic<bool> reached_{false};              // a connection was established once
};

}  // namespace commhost::tcpstore
