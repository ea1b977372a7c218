// SPDX-License-Identifier: Apache-2.0
// A real etcd server for the etcd store tests: a child process on free loopback ports
// (client and peer) with a temp data dir, killed and its dir removed by the destructor.
// kill() and start() stop and restart it on the same ports and data, as an outage would.
// Call start() from a thread that outlives the server: the child is killed when the
// thread that forked it exits (PR_SET_PDEATHSIG), so a crashed test leaves no etcd.
// Tests skip (GTEST_SKIP with missingReason()) where no etcd binary is installed.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio/ip/tcp.hpp>
#include <boost/filesystem.hpp>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "http.h"

namespace commhost::test {

class EtcdServer {
 public:
  // Where the binary is: ETCD_BIN is not read (no env in code); Debian's etcd-server package.
  static std::string binary() {
    for (const char* path : {"/usr/bin/etcd", "/usr/local/bin/etcd"})
      if (::access(path, X_OK) == 0) return path;
    return "";
  }
  // "" when the tests can run; else the one-line reason they skip.
  static std::string missingReason() {
    return binary().empty() ? "no etcd binary (/usr/bin/etcd); install Debian's etcd-server (tools/setup does)" : "";
  }

  // maxRequestBytes: etcd's --max-request-bytes (the default leaves room for the
  // conformance suite's 16 MiB value; etcd's own default is 1.5 MiB).
  explicit EtcdServer(int64_t maxRequestBytes = 32 << 20)
      : maxRequestBytes_(maxRequestBytes),
        dir_((boost::filesystem::temp_directory_path() / boost::filesystem::unique_path("commhost-etcd-%%%%%%"))
                 .string()),
        clientPort_(freePort()),
        peerPort_(freePort()) {
    boost::filesystem::create_directories(dir_);
    // A free port is free only until someone else binds it: a test running alongside
    // can take it between freePort() and etcd's bind. Pick fresh ports then (only here:
    // a restart must keep its ports).
    for (int attempt = 1;; ++attempt) {
      try {
        start();
        return;
      } catch (const std::runtime_error& e) {
        if (attempt == 5 || std::string(e.what()).find("address already in use") == std::string::npos) throw;
        boost::system::error_code ec;
        boost::filesystem::remove_all(dir_, ec);
        boost::filesystem::create_directories(dir_);
        clientPort_ = freePort();
        peerPort_ = freePort();
      }
    }
  }
  ~EtcdServer() {
    kill();
    boost::system::error_code ec;
    boost::filesystem::remove_all(dir_, ec);
  }

  int port() const { return clientPort_; }
  std::string endpoint() const { return "127.0.0.1:" + std::to_string(clientPort_); }

  // Starts etcd and waits (up to 10 s) until it answers a range request.
  void start() {
    const std::string client = "http://127.0.0.1:" + std::to_string(clientPort_);
    const std::string peer = "http://127.0.0.1:" + std::to_string(peerPort_);
    std::vector<std::string> args = {
        binary(), "--name", "default", "--data-dir", dir_ + "/data", "--listen-client-urls", client,
        "--advertise-client-urls", client, "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
        "--initial-cluster", "default=" + peer,
        // Room for the conformance suite's 16 MiB value by default (etcd's own is 1.5 MiB).
        "--max-request-bytes", std::to_string(maxRequestBytes_),
        // Fast single-member elections, so a lease TTL of 1 s is honoured (etcd
        // raises a TTL below 1.5 election timeouts); no fsync: test data.
        "--heartbeat-interval", "50", "--election-timeout", "500", "--unsafe-no-fsync", "--log-level", "warn"};
    const std::string log = dir_ + "/etcd.log";
    pid_ = ::fork();
    if (pid_ < 0) throw std::runtime_error("cannot fork etcd");
    if (pid_ == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive a crashed test binary
      const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      if (fd >= 0) {
        ::dup2(fd, 1);
        ::dup2(fd, 2);
      }
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    const auto deadline = etcdstore::Clock::now() + std::chrono::seconds(10);
    const etcdstore::Endpoint ep{"127.0.0.1", std::to_string(clientPort_)};
    while (true) {
      try {
        etcdstore::post(ep, "/v3/kv/range", {{"key", "AA=="}}, etcdstore::Clock::now() + std::chrono::seconds(1));
        return;
      } catch (const std::exception& e) {
        int status = 0;
        const bool exited = ::waitpid(pid_, &status, WNOHANG) == pid_;
        if (exited || etcdstore::Clock::now() > deadline) {
          if (!exited) kill();  // never leave a half-started etcd behind
          pid_ = -1;
          std::ifstream in(log);
          std::stringstream text;
          text << in.rdbuf();
          throw std::runtime_error("etcd did not start on " + endpoint() + " (" + e.what() + "); its log:\n" +
                                   text.str());
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    }
  }

  // SIGKILL, as a crash would; the data dir stays for start().
  void kill() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

 private:
  static int freePort() {
    boost::asio::io_context ioc;
    boost::asio::ip::tcp::acceptor acceptor(ioc, {boost::asio::ip::make_address("127.0.0.1"), 0});
    return acceptor.local_endpoint().port();
  }

  int64_t maxRequestBytes_;
  std::string dir_;
  int clientPort_;
  int peerPort_;
  pid_t pid_ = -1;
};

}  // namespace commhost::test
