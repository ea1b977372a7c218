// SPDX-License-Identifier: Apache-2.0
// Creating a tcp store from its options: decides whether this process hosts the server
// (serve: auto|always|never), starts it, and connects a client to it.
#pragma once

#include "commhost/plugin.h"
#include "commhost/typed_options.h"

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

}  // namespace commhost::tcpstore
