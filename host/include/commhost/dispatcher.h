// SPDX-License-Identifier: Apache-2.0
// Dispatcher: picks the backend for each (op, device, message size).
//
// Built once from the config's routes and the backends' capability manifests. The
// most specific route wins: one naming the op beats one that does not, then one naming
// the device, then the narrower byte range. A route with no op applies only to the ops
// its backend has, so a specialised backend can fall back to a general one. Build
// errors (ConfigError) name the route's file:line:col and the backend:
// - a route naming an op or device its backend lacks;
// - two equally specific routes overlapping;
// - an op, on a device some route serves, that no route serves (or with a gap in sizes).
// Lookups are lock-free and allocation-free; the table is immutable once built.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "commhost/capabilities.h"
#include "commhost/config.h"
#include "commhost/export.h"

namespace commhost {

class PluginRegistry;

class COMMHOST_API RouteTable {
 public:
  struct Segment {
    int64_t minBytes, maxBytes;  // inclusive
    int backend;                 // index into backendNames()
    int route;                   // index into the config's routes, for messages
  };

  // The table for a loaded config: each backend's manifest comes from its plugin's
  // descriptor; a plugin that did not load is taken to have every op, so its routes
  // are accepted and fail only when used.
  static RouteTable forConfig(const Config& config, const PluginRegistry& registry);
  // `backends` gives each backend name's manifest.
  static RouteTable build(const std::vector<RouteSpec>& routes,
                          const std::vector<std::pair<std::string, Capabilities>>& backends);

  // The backend index for this op, or -1 when no route serves it.
  int route(OpType op, DeviceType device, int64_t bytes) const {
    for (const Segment& s : table_[static_cast<int>(op)][static_cast<int>(device)])
      if (bytes >= s.minBytes && bytes <= s.maxBytes) return s.backend;
    return -1;
  }
  const std::vector<Segment>& segments(OpType op, DeviceType device) const {
    return table_[static_cast<int>(op)][static_cast<int>(device)];
  }
  const std::vector<std::string>& backendNames() const { return names_; }
  bool servesDevice(DeviceType device) const { return devices_.has(device); }
  // One line per (device, op, byte range) -> backend, for `config check`.
  std::string describe() const;

 private:
  std::array<std::array<std::vector<Segment>, kNumDeviceTypes>, kNumOpTypes> table_;
  std::vector<std::string> names_;
  EnumSet<DeviceType> devices_;
};

}  // namespace commhost
