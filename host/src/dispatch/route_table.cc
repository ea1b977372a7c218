// SPDX-License-Identifier: Apache-2.0
#include <algorithm>
#include <set>

#include "commhost/dispatcher.h"
#include "commhost/errors.h"
#include "commhost/registry.h"

namespace commhost {
namespace {

struct Candidate {
  int route;
  int backend;
  int specificity;  // 2 for an op, 1 for a device
  int64_t minBytes, maxBytes;
  unsigned __int128 width() const { return static_cast<unsigned __int128>(maxBytes - minBytes) + 1; }
};

std::string range(int64_t lo, int64_t hi) {
  return hi == INT64_MAX ? std::to_string(lo) + "+ bytes" : std::to_string(lo) + ".." + std::to_string(hi) + " bytes";
}

bool servedByHost(OpType op) { return op == OpType::MonitoredBarrier; }

}  // namespace

RouteTable RouteTable::build(const std::vector<RouteSpec>& routes,
                             const std::vector<std::pair<std::string, Capabilities>>& backends) {
  RouteTable table;
  std::vector<std::string> problems;
  auto backendIndex = [&](const std::string& name) {
    for (size_t i = 0; i < backends.size(); ++i)
      if (backends[i].first == name) return static_cast<int>(i);
    return -1;
  };
  for (const auto& b : backends) table.names_.push_back(b.first);

  for (size_t r = 0; r < routes.size(); ++r) {
    const RouteSpec& route = routes[r];
    const int b = backendIndex(route.backend);
    if (b < 0) {
      problems.push_back(route.where + ": route to unknown backend '" + route.backend + "'");
      continue;
    }
    const Capabilities& caps = backends[b].second;
    if (route.op && !caps.ops.has(*route.op))
      problems.push_back(route.where + ": route sends " + opName(*route.op) + " to backend '" + route.backend +
                         "', which does not implement it; route " + opName(*route.op) + " to another backend");
    if (route.device && !caps.devices.has(*route.device))
      problems.push_back(route.where + ": route sends " + deviceTypeName(*route.device) + " tensors to backend '" +
                         route.backend + "', which does not support that device");
    for (int d = 0; d < kNumDeviceTypes; ++d) {
      const auto dev = static_cast<DeviceType>(d);
      if (route.device ? *route.device == dev : caps.devices.has(dev)) table.devices_.add(dev);
    }
  }
  if (!problems.empty()) {
    std::string message = "routes:";
    for (const auto& p : problems) message += "\n  " + p;
    throw ConfigError(message);
  }

  for (int o = 0; o < kNumOpTypes; ++o) {
    const auto op = static_cast<OpType>(o);
    if (servedByHost(op)) continue;
    for (int d = 0; d < kNumDeviceTypes; ++d) {
      const auto dev = static_cast<DeviceType>(d);
      if (!table.devices_.has(dev)) continue;
      std::vector<Candidate> candidates;
      std::set<int64_t> points = {0};
      for (size_t r = 0; r < routes.size(); ++r) {
        const RouteSpec& route = routes[r];
        const int b = backendIndex(route.backend);
        const Capabilities& caps = backends[b].second;
        const bool opMatches = route.op ? *route.op == op : caps.ops.has(op);
        const bool devMatches = route.device ? *route.device == dev : caps.devices.has(dev);
        if (!opMatches || !devMatches) continue;
        candidates.push_back(
            {static_cast<int>(r), b, (route.op ? 2 : 0) + (route.device ? 1 : 0), route.minBytes, route.maxBytes});
        points.insert(route.minBytes);
        if (route.maxBytes != INT64_MAX) points.insert(route.maxBytes + 1);
      }
      const std::string what = std::string(opName(op)) + " on " + deviceTypeName(dev);
      if (candidates.empty()) {
        problems.push_back("no route serves " + what + ": add a route for it (e.g. { device: " + deviceTypeName(dev) +
                           ", op: " + opName(op) + ", backend: NAME }) to a backend that implements it");
        continue;
      }
      std::vector<Segment>& segments = table.table_[o][d];
      const std::vector<int64_t> starts(points.begin(), points.end());
      for (size_t i = 0; i < starts.size(); ++i) {
        const int64_t lo = starts[i];
        const int64_t hi = i + 1 < starts.size() ? starts[i + 1] - 1 : INT64_MAX;
        const Candidate* best = nullptr;
        for (const auto& c : candidates) {
          if (c.minBytes > lo || c.maxBytes < hi) continue;
          if (!best || c.specificity > best->specificity ||
              (c.specificity == best->specificity && c.width() < best->width())) {
            best = &c;
          } else if (c.specificity == best->specificity && c.width() == best->width() && c.backend != best->backend) {
            problems.push_back(routes[c.route].where + ": route to '" + routes[c.route].backend + "' and " +
                               routes[best->route].where + ": route to '" + routes[best->route].backend +
                               "' are equally specific for " + what + " at " + range(lo, hi) +
                               "; name the op or narrow the byte range of one of them");
          }
        }
        if (!best) {
          problems.push_back("no route serves " + what + " for messages of " + range(lo, hi) +
                             ": widen a route's min_bytes/max_bytes or add one");
          continue;
        }
        if (!segments.empty() && segments.back().route == best->route) {
          segments.back().maxBytes = hi;
        } else {
          segments.push_back({lo, hi, best->backend, best->route});
        }
      }
    }
  }
  if (!problems.empty()) {
    std::sort(problems.begin(), problems.end());
    problems.erase(std::unique(problems.begin(), problems.end()), problems.end());
    std::string message = "routes:";
    for (const auto& p : problems) message += "\n  " + p;
    throw ConfigError(message);
  }
  return table;
}

RouteTable RouteTable::forConfig(const Config& config, const PluginRegistry& registry) {
  std::vector<std::pair<std::string, Capabilities>> manifests;
  for (const auto& [name, ref] : config.backends) {
    const PluginEntry* e = registry.find(ref.plugin);
    if (e && e->descriptor) {
      manifests.emplace_back(name, e->descriptor->capabilities);
    } else {
      manifests.emplace_back(name, Capabilities{Capabilities::allOps(),
                                                Capabilities::allDTypes(),
                                                Capabilities::allReduceOps(),
                                                EnumSet<DeviceType>::all(kNumDeviceTypes),
                                                {}});
    }
  }
  return build(config.routes, manifests);
}

std::string RouteTable::describe() const {
  std::string out;
  for (int d = 0; d < kNumDeviceTypes; ++d) {
    if (!devices_.has(static_cast<DeviceType>(d))) continue;
    for (int o = 0; o < kNumOpTypes; ++o) {
      for (const auto& s : table_[o][d]) {
        out += std::string(deviceTypeName(static_cast<DeviceType>(d))) + " " + opName(static_cast<OpType>(o)) + " " +
               range(s.minBytes, s.maxBytes) + " -> " + names_[s.backend] + "\n";
      }
    }
  }
  return out;
}

}  // namespace commhost
