// SPDX-License-Identifier: Apache-2.0
// Opening one TCP connection, for plugins that are clients of a server (the tcp and
// torch_tcp store plugins): resolves the host, tries each of its addresses with a bounded
// connect (a host that silently drops SYNs costs `limit`, not the kernel's two minutes),
// and hands back a blocking, close-on-exec socket with TCP_NODELAY set.
#pragma once

#include <chrono>
#include <string>

#include "commhost/export.h"

namespace commhost {

struct TcpConnectResult {
  int fd = -1;           // the connected socket (the caller closes it), or -1
  std::string error;     // when fd is -1: what went wrong ("Connection refused", "connect timed out", ...)
  bool refused = false;  // the host answered that nothing listens on the port (ECONNREFUSED), as
                         // opposed to a timeout or an unreachable network, which may pass
};

// One attempt (no retry): a caller that waits for a server to come up loops on it.
COMMHOST_API TcpConnectResult connectTcp(const std::string& host, int port, std::chrono::milliseconds limit);

}  // namespace commhost
