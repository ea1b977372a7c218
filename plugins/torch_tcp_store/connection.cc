// SPDX-License-Identifier: Apache-2.0
#include "connection.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include "commhost/errors.h"
#include "commhost/sdk/tcp_connect.h"

namespace commhost::torchtcp {
namespace {

// The largest value this client accepts in a reply: a torch store value is small
// (rendezvous data, status records); a larger length means the stream is out of step.
constexpr uint64_t kMaxValue = 1ull << 30;

}  // namespace

Connection::Connection(const std::string& host, int port, Deadline deadline)
    : peer_(host + ":" + std::to_string(port)) {
  auto pause = std::chrono::milliseconds(10);
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline -
                                                                            std::chrono::steady_clock::now());
    const TcpConnectResult attempt = connectTcp(host, port, std::max(left, std::chrono::milliseconds(1)));
    fd_ = attempt.fd;
    if (fd_ >= 0) return;
    if (std::chrono::steady_clock::now() + pause >= deadline)
      throw StoreError("torch_tcp store: cannot connect to torch's TCPStore at " + peer_ + " (" + attempt.error +
                       "). Next: check the address (MASTER_ADDR:MASTER_PORT of the job) and that the job is running");
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(500));
  }
}

Connection::~Connection() {
  if (fd_ >= 0) ::close(fd_);
}

void Connection::awaitReady(short events, Deadline deadline, const std::string& what) {
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline -
                                                                            std::chrono::steady_clock::now());
    if (left.count() <= 0)
      throw TimeoutError("torch_tcp store: " + what + " got no answer from torch's TCPStore at " + peer_ +
                         " within its timeout");
    pollfd p{fd_, events, 0};
    const int rc = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count(), 1000)));
    if (rc > 0) return;
    if (rc < 0 && errno != EINTR)
      throw StoreError("torch_tcp store: " + what + ": poll failed on " + peer_ + ": " + std::strerror(errno));
  }
}

void Connection::send(const std::string& data, Deadline deadline, const std::string& what) {
  size_t sent = 0;
  while (sent < data.size()) {
    awaitReady(POLLOUT, deadline, what);
    const ssize_t n = ::send(fd_, data.data() + sent, data.size() - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    if (n <= 0)
      throw StoreError("torch_tcp store: " + what + ": sending to torch's TCPStore at " + peer_ + " failed: " +
                       std::strerror(errno) + ". Next: the job's store (its rank 0 or agent) may be gone");
    sent += static_cast<size_t>(n);
  }
}

bool Connection::recvExact(void* out, size_t n, Deadline deadline, const std::string& what) {
  auto* p = static_cast<char*>(out);
  size_t got = 0;
  while (got < n) {
    awaitReady(POLLIN, deadline, what);
    const ssize_t r = ::recv(fd_, p + got, n - got, MSG_DONTWAIT);
    if (r < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    // A close before the first byte, as a FIN or a reset: the caller decides what it means.
    if ((r == 0 || (r < 0 && errno == ECONNRESET)) && got == 0) return false;
    if (r <= 0)
      throw StoreError("torch_tcp store: " + what + ": torch's TCPStore at " + peer_ +
                       " closed the connection mid-answer. Next: the job's store (its rank 0 or agent) may be gone");
    got += static_cast<size_t>(r);
  }
  return true;
}

Bytes Connection::recvBytes(Deadline deadline, const std::string& what) {
  const auto size = static_cast<uint64_t>(recvI64(deadline, what));
  if (size > kMaxValue)
    throw StoreError("torch_tcp store: " + what + ": torch's TCPStore at " + peer_ + " announced a value of " +
                     std::to_string(size) + " bytes; the connection is out of step (is it a torch store, and of the " +
                     "protocol set in store.options.protocol?)");
  Bytes out(size);
  if (size && !recvExact(out.data(), size, deadline, what))
    throw StoreError("torch_tcp store: " + what + ": torch's TCPStore at " + peer_ + " closed the connection");
  return out;
}

int64_t Connection::recvI64(Deadline deadline, const std::string& what) {
  int64_t v = 0;
  if (!recvExact(&v, sizeof v, deadline, what))
    throw StoreError("torch_tcp store: " + what + ": torch's TCPStore at " + peer_ +
                     " closed the connection instead of answering (a key it does not hold, or another protocol: see "
                     "store.options.protocol)");
  return v;
}

uint8_t Connection::recvU8(Deadline deadline, const std::string& what) {
  uint8_t v = 0;
  if (!recvExact(&v, 1, deadline, what))
    throw StoreError("torch_tcp store: " + what + ": torch's TCPStore at " + peer_ + " closed the connection");
  return v;
}

}  // namespace commhost::torchtcp
