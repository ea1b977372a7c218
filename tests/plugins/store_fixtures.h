// SPDX-License-Identifier: Apache-2.0
// Real stores for the store tests: a HashStore, a tcp store (server on a loopback
// port, one client per connection), a file store (a temp file), an etcd store (a real
// etcd child process, etcd_server.h) and torch_tcp (torch's own TCPStore server in a
// python3 child, torch_store_server.h), behind one shape.
#pragma once

#include <boost/filesystem.hpp>

#include "client.h"
#include "commhost/commhost.h"
#include "etcd_server.h"
#include "etcd_store.h"
#include "file_store.h"
#include "server.h"
#include "torch_store_server.h"
#include "torch_tcp_store.h"

namespace commhost::test {

class StoreFixture {
 public:
  virtual ~StoreFixture() = default;
  // A new handle on the same store, as another rank would have (its own connection).
  virtual StorePtr connect(std::chrono::milliseconds timeout = std::chrono::seconds(10)) = 0;
};

class HashFixture final : public StoreFixture {
 public:
  StorePtr connect(std::chrono::milliseconds timeout = std::chrono::seconds(10)) override {
    if (!store_) store_ = std::make_shared<HashStore>(timeout);
    return store_;
  }

 private:
  StorePtr store_;
};

class TcpFixture final : public StoreFixture {
 public:
  explicit TcpFixture(std::string token = "") : token_(std::move(token)) {
    tcpstore::ServerOptions options;
    options.token = token_;
    options.maxFrame = 32u << 20;
    server_ = std::make_unique<tcpstore::Server>(options);
  }
  StorePtr connect(std::chrono::milliseconds timeout = std::chrono::seconds(10)) override {
    return connectWith(token_, timeout);
  }
  StorePtr connectWith(const std::string& token, std::chrono::milliseconds timeout) {
    tcpstore::ClientOptions options;
    options.port = server_->port();
    options.token = token;
    options.timeout = timeout;
    options.maxFrame = 32u << 20;
    return std::make_shared<tcpstore::Client>(options);
  }
  int port() const { return server_->port(); }
  void stopServer() { server_.reset(); }

 private:
  std::string token_;
  std::unique_ptr<tcpstore::Server> server_;
};

class FileFixture final : public StoreFixture {
 public:
  FileFixture()
      : path_((boost::filesystem::temp_directory_path() / boost::filesystem::unique_path("commhost-%%%%%%.store"))
                  .string()) {}
  StorePtr connect(std::chrono::milliseconds timeout = std::chrono::seconds(10)) override {
    return std::make_shared<filestore::FileStore>(path_, timeout);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// One etcd server for the whole test binary (started on first use, killed at exit), and a
// fresh key prefix per fixture: tests stay apart without paying an etcd start each.
class EtcdFixture final : public StoreFixture {
 public:
  EtcdFixture() : prefix_("test" + std::to_string(next()++) + "/") {}
  static EtcdServer& server() {
    static EtcdServer shared;
    return shared;
  }
  StorePtr connect(std::chrono::milliseconds timeout = std::chrono::seconds(10)) override {
    return connectTo(server(), prefix_, timeout);
  }
  static std::shared_ptr<etcdstore::EtcdStore> connectTo(const EtcdServer& server, const std::string& prefix,
                                                         std::chrono::milliseconds timeout, int leaseTtlSeconds = 10) {
    etcdstore::Settings s;
    s.endpoint = {"127.0.0.1", std::to_string(server.port())};
    s.prefix = prefix;
    s.leaseKeys = {"supervisor/heartbeat/"};
    s.leaseTtlSeconds = leaseTtlSeconds;
    s.timeout = timeout;
    return std::make_shared<etcdstore::EtcdStore>(std::move(s));
  }
  const std::string& prefix() const { return prefix_; }

 private:
  static int& next() {
    static int n = 0;
    return n;
  }
  std::string prefix_;
};

// A fresh torch server per fixture: torch's numKeys counts every key of the server.
class TorchTcpFixture final : public StoreFixture {
 public:
  StorePtr connect(std::chrono::milliseconds timeout = std::chrono::seconds(10)) override {
    return std::make_shared<torchtcp::TorchTcpStore>("127.0.0.1", server_.port(), torchtcp::ProtocolChoice::Auto,
                                                     timeout, "test");
  }

 private:
  TorchStoreServer server_;
};

inline std::unique_ptr<StoreFixture> makeFixture(const std::string& kind) {
  if (kind == "hash") return std::make_unique<HashFixture>();
  if (kind == "tcp") return std::make_unique<TcpFixture>();
  if (kind == "etcd") return std::make_unique<EtcdFixture>();
  if (kind == "torch_tcp") return std::make_unique<TorchTcpFixture>();
  return std::make_unique<FileFixture>();
}

}  // namespace commhost::test
