// SPDX-License-Identifier: Apache-2.0
// Creating a tcp store from its options: decides whether this process hosts the server
// (serve: auto|always|never), starts it, and connects a client to it.
#pragma once

#include "commhost/sdk/plugin.h"
#include "commhost/sdk/typed_options.h"

namespace commhost::tcpstore {

enum class Serve { Auto, Always, Never };

// The plugin options (schema in tcp_store.cc).
struct Options {
  std::string host;
  int port = 0;
  Serve serve = Serve::Auto;
  std::string bind;
  std::chrono::milliseconds timeout{0};
  std::string authToken;
  uint32_t maxFrame = 0;
  std::chrono::milliseconds linger{0};
  int maxConnections = 0;
  std::chrono::milliseconds authTimeout{0};
  std::chrono::milliseconds frameTimeout{0};
  std::chrono::milliseconds progressInterval{0};
  static OptionSchema<Options> schema();
};
std::shared_ptr<Store> create(const Options& options, const StoreContext& ctx);

// The server's connection cap: the max_connections option, or with 0 (the default) one
// sized from the job, 4 per rank plus 64 and never under 4096. Each rank holds about two
// connections (its groups' and the supervisor's), so a fixed 4096 refused a ~2,048-rank job.
int connectionCap(int option, int worldSize);

}  // namespace commhost::tcpstore
