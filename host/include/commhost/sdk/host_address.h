// SPDX-License-Identifier: Apache-2.0
// This host's addresses, for plugins that listen or hand peers an address to reach them
// (the gloo backend's device, the tcp store's server): a name resolved to one of this
// host's own addresses, and the address other hosts reach this one at when the config
// names none. Shared so that every plugin picks the same address the same way.
#pragma once

#include <string>

#include "commhost/export.h"

namespace commhost {

struct LocalAddress {
  std::string address;  // numeric, an address of this host a socket can bind; "" when none
  std::string error;    // the name did not resolve: the resolver's reason; else ""
  std::string foreign;  // the name resolved, but only to these addresses ("a, b"), none of this host
  // Why `address` is empty, for a message about the name: "resolves to 10.0.0.2, not an
  // address of this host" or "does not resolve here: <reason>".
  std::string whyNone() const {
    return error.empty() ? "resolves to " + foreign + ", not an address of this host"
                         : "does not resolve here: " + error;
  }
};

// `name` (a hostname or a numeric address) as the first of its addresses this host can
// bind (as Gloo checks: a bind to port 0).
COMMHOST_API LocalAddress localAddressOf(const std::string& name);

// The address peers on other hosts reach this one at when no device or address is
// configured: this host's name resolved as above when that gives an address other than
// loopback (torch's Gloo default), else "127.0.0.1" (a single host, or a name that maps to
// loopback, as Debian's /etc/hosts does by default).
COMMHOST_API std::string defaultHostAddress();

// The address a server listens on when its clients were told to reach it at `host` (a
// store's host): 127.0.0.1 when `host` is empty, "0.0.0.0" or loopback (a job on one
// machine), else `host` as one of this host's addresses (localAddressOf; address empty,
// with why, when it is not one of them).
COMMHOST_API LocalAddress listenAddressFor(const std::string& host);

// 127.0.0.0/8, ::1 or "localhost".
COMMHOST_API bool isLoopbackAddress(const std::string& address);

}  // namespace commhost
