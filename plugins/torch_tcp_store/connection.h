// SPDX-License-Identifier: Apache-2.0
// One blocking TCP connection to a torch TCPStore server, every call bounded by a
// deadline (poll before each read and write), so a server that stops answering costs
// the caller its timeout, never a hang.
// Errors: TimeoutError when the deadline passes, StoreError when the server cannot be
// reached or closes the connection; both name host:port and `what` (the op and key).
// A connection that threw is in an unknown state: the caller drops it.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "commhost/store.h"

namespace commhost::torchtcp {

using Deadline = std::chrono::steady_clock::time_point;

class Connection {
 public:
  // Connects, retrying refused or unreachable attempts until `deadline` (a rank may ask
  // before the server listens).
  Connection(const std::string& host, int port, Deadline deadline);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  void send(const std::string& data, Deadline deadline, const std::string& what);
  // false: the server closed (or reset) the connection before the first byte (the 2.x
  // probe's answer).
  bool recvExact(void* out, size_t n, Deadline deadline, const std::string& what);
  Bytes recvBytes(Deadline deadline, const std::string& what);
  int64_t recvI64(Deadline deadline, const std::string& what);
  uint8_t recvU8(Deadline deadline, const std::string& what);
  const std::string& peer() const { return peer_; }

 private:
  void awaitReady(short events, Deadline deadline, const std::string& what);
  int fd_ = -1;
  std::string peer_;  // host:port
};

}  // namespace commhost::torchtcp
