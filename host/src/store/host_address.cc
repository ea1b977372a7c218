// SPDX-License-Identifier: Apache-2.0
#include "commhost/sdk/host_address.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <climits>

namespace commhost {
namespace {

// Whether this host can bind `addr` (so it is one of its own addresses), as Gloo checks.
bool bindable(const addrinfo& addr) {
  const int fd = ::socket(addr.ai_family, addr.ai_socktype, addr.ai_protocol);
  if (fd < 0) return false;
  const bool ok = ::bind(fd, addr.ai_addr, addr.ai_addrlen) == 0;
  ::close(fd);
  return ok;
}

std::string addressText(const addrinfo& addr) {
  char text[INET6_ADDRSTRLEN] = {};
  const void* raw = addr.ai_family == AF_INET6
                        ? static_cast<const void*>(&reinterpret_cast<const sockaddr_in6*>(addr.ai_addr)->sin6_addr)
                        : static_cast<const void*>(&reinterpret_cast<const sockaddr_in*>(addr.ai_addr)->sin_addr);
  return ::inet_ntop(addr.ai_family, raw, text, sizeof text) ? std::string(text) : std::string();
}

}  // namespace

LocalAddress localAddressOf(const std::string& name) {
  LocalAddress out;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int rv = ::getaddrinfo(name.c_str(), nullptr, &hints, &found);
  if (rv != 0 || found == nullptr) {
    out.error = rv != 0 ? ::gai_strerror(rv) : "no address";
    return out;
  }
  for (const addrinfo* a = found; a != nullptr && out.address.empty(); a = a->ai_next) {
    const std::string text = addressText(*a);
    if (text.empty()) continue;
    if (bindable(*a)) out.address = text;
    else out.foreign += (out.foreign.empty() ? "" : ", ") + text;
  }
  ::freeaddrinfo(found);
  if (!out.address.empty()) out.foreign.clear();
  else if (out.foreign.empty()) out.error = "no usable address";
  return out;
}

std::string defaultHostAddress() {
  char name[HOST_NAME_MAX + 1] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return "127.0.0.1";
  const LocalAddress mine = localAddressOf(name);
  return mine.address.empty() || isLoopbackAddress(mine.address) ? "127.0.0.1" : mine.address;
}

LocalAddress listenAddressFor(const std::string& host) {
  if (host.empty() || host == "0.0.0.0" || isLoopbackAddress(host)) return LocalAddress{"127.0.0.1", "", ""};
  return localAddressOf(host);
}

bool isLoopbackAddress(const std::string& address) {
  return address == "localhost" || address.rfind("127.", 0) == 0 || address == "::1";
}

}  // namespace commhost
