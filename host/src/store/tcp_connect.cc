// SPDX-License-Identifier: Apache-2.0
#include "commhost/sdk/tcp_connect.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <system_error>

namespace commhost {
namespace {

// Connects with a deadline: the socket is non-blocking for the connect only.
bool connectWithin(int fd, const sockaddr* addr, socklen_t len, std::chrono::milliseconds limit, std::string& error,
                   bool& refused) {
  refused = false;
  const int flags = ::fcntl(fd, F_GETFL);
  ::fcntl(fd, F_SETFL, flags | O_NONBLOCK);
  int rc = ::connect(fd, addr, len);
  if (rc != 0 && errno == EINPROGRESS) {
    pollfd pfd{fd, POLLOUT, 0};
    rc = ::poll(&pfd, 1, static_cast<int>(std::max<int64_t>(1, limit.count())));
    if (rc == 0) {
      error = "connect timed out";
      return false;
    }
    int soError = 0;
    socklen_t soLen = sizeof soError;
    ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &soError, &soLen);
    if (soError != 0) errno = soError;
    rc = soError == 0 ? 0 : -1;
  }
  ::fcntl(fd, F_SETFL, flags);
  if (rc != 0) {
    refused = errno == ECONNREFUSED;
    error = std::generic_category().message(errno);
  }
  return rc == 0;
}

}  // namespace

TcpConnectResult connectTcp(const std::string& host, int port, std::chrono::milliseconds limit) {
  TcpConnectResult out;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found);
  if (rc != 0) {
    out.error = std::string("cannot resolve host: ") + ::gai_strerror(rc);
    return out;
  }
  for (addrinfo* a = found; a; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    if (connectWithin(fd, a->ai_addr, a->ai_addrlen, limit, out.error, out.refused)) {
      out.fd = fd;
      break;
    }
    ::close(fd);
  }
  ::freeaddrinfo(found);
  if (out.fd >= 0) {
    const int one = 1;
    ::setsockopt(out.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
  return out;
}

}  // namespace commhost
