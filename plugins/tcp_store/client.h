// The tcp store client: one blocking TCP connection per store object.
//
// Threading: every call takes the connection's mutex, so a client may be shared by
// threads; calls from different threads are served one at a time.
// Errors: a server that cannot be reached within the timeout, or that goes away during
// a call, gives StoreError naming host:port and what to check; never a hang.
#pragma once

#include <memory>
#include <mutex>
#include <string>

#include "commhost/logging.h"
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
};

class Client final : public Store {
 public:
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
  void connectWithRetry();
  void closeSocket();
  [[noreturn]] void lost(Op op, const std::string& what);

  std::shared_ptr<void> keepAlive_;  // declared first: released last
  ClientOptions options_;
  std::string where_;  // "host:port"
  std::string who_;    // "[rank N] " or ""
  std::mutex mutex_;   // guards fd_ and the request/response exchange
  int fd_ = -1;
};

}  // namespace commhost::tcpstore
