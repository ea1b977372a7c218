// SPDX-License-Identifier: Apache-2.0
#include "backend_factory.h"

#include <algorithm>

#include "../core/backend_names.h"
#include "commhost/errors.h"
#include "commhost/sdk/launch_report.h"
#include "commhost/sdk/plugin.h"

namespace commhost {

namespace {

// hier over hier is fine; a cycle (a -> b -> a) is not, and shows up as depth.
constexpr int kMaxDepth = 4;

std::string configured(const Config& cfg) {
  std::string out;
  for (const auto& kv : cfg.backends) out += (out.empty() ? "" : ", ") + kv.first;
  return out;
}

// The checks makeBackend makes before it creates anything; all ranks of the parent run
// the same config, so they refuse alike.
void checkSubRequest(const Config& cfg, const BackendSite& parent, const std::string& parentName,
                     const std::string& name, const std::vector<int>& members, const std::string& label) {
  const ErrorContext where{parent.group, parent.rank, "create backend"};
  if (!cfg.backends.count(name))
    raise(ErrorCode::Config, where,
          "backend '" + parentName + "' asked for backend '" + name +
              "', which is not configured (configured: " + configured(cfg) + ")",
          "add it under `backends:` or fix the option that names it");
  if (name == parentName)
    raise(ErrorCode::Config, where, "backend '" + parentName + "' names itself as one of its parts",
          "name another configured backend");
  if (parent.depth + 1 > kMaxDepth)
    raise(ErrorCode::Config, where,
          "backends nest more than " + std::to_string(kMaxDepth) + " deep at '" + name + "' (a cycle?)",
          "check the options that name other backends");
  if (label.empty() || label.find('/') != std::string::npos)
    raise(ErrorCode::InvalidArgument, where, "sub-backend label '" + label + "' is empty or has a '/'",
          "report it to the author of backend '" + parentName + "'s plugin");
  const bool sorted = std::is_sorted(members.begin(), members.end()) &&
                      std::adjacent_find(members.begin(), members.end()) == members.end();
  const bool inRange = !members.empty() && members.front() >= 0 && members.back() < parent.worldSize;
  if (!sorted || !inRange || !std::binary_search(members.begin(), members.end(), parent.rank))
    raise(ErrorCode::InvalidArgument, where,
          "backend '" + parentName + "' asked for '" + name + "' over ranks that are not sorted, unique ranks of " +
              "the group including this one",
          "report it to the author of backend '" + parentName + "'s plugin");
}

}  // namespace

std::shared_ptr<Backend> createConfiguredBackend(const Config& cfg, const PluginRegistry& registry,
                                                 const std::string& name, const BackendSite& site, bool* composite) {
  const PluginRef& ref = cfg.backends.at(name);
  const PluginEntry* e = registry.find(ref.plugin);
  if (!e || !e->usable())
    raise(ErrorCode::Config, {site.group, site.rank},
          "backend '" + name + "' is unavailable: " + (e ? e->unavailable : "plugin '" + ref.plugin + "' not found"),
          "fix what the plugin needs, or use another backend");
  BackendContext ctx;
  ctx.groupName = site.group;
  ctx.backendName = name;
  ctx.rank = site.rank;
  ctx.worldSize = site.worldSize;
  ctx.store = site.store;
  ctx.timeout = cfg.timeout();
  ctx.splitFrom = site.splitFrom;
  ctx.reportLaunch = launchReporter();
  ctx.logger = std::make_shared<Logger>("commhost." + ref.plugin,
                                        "group " + site.group + " rank " + std::to_string(site.rank));
  ctx.makeBackend = [&cfg, &registry, &site, &name, composite](const std::string& part, const std::vector<int>& members,
                                                               const std::string& label) {
    checkSubRequest(cfg, site, name, part, members, label);
    if (composite) *composite = true;
    BackendSite sub;
    sub.group = site.group + "/" + label;
    sub.rank = static_cast<int>(std::lower_bound(members.begin(), members.end(), site.rank) - members.begin());
    sub.worldSize = static_cast<int>(members.size());
    sub.store = std::make_shared<PrefixStore>(label + "/" + part, site.store);
    sub.depth = site.depth + 1;
    return createConfiguredBackend(cfg, registry, part, sub);
  };
  std::unique_ptr<Backend> raw;
  try {
    raw = e->descriptor->createBackend(ref.options, ctx);
  } catch (const std::exception& ex) {
    // A config mistake found inside (e.g. a composite naming a backend that does not
    // exist) stays a ConfigError; anything else is the plugin failing to start.
    const auto* err = dynamic_cast<const Error*>(&ex);
    raise(err && err->code() == ErrorCode::Config ? ErrorCode::Config : ErrorCode::Plugin, {site.group, site.rank},
          "backend '" + name + "' (plugin " + ref.plugin + " from " + e->path + ") failed to start: " + ex.what(),
          "fix its options at " + ref.where + " or route its ops elsewhere");
  }
  if (!raw)
    raise(ErrorCode::Plugin, {site.group, site.rank}, "plugin " + ref.plugin + " returned no backend",
          "report it to its author");
  backend_names::remember(raw.get(), name);  // for the NotSupported messages of a partial backend
  // The deleter holds the library, so the plugin's code outlives the object.
  std::shared_ptr<void> library = e->library;
  return std::shared_ptr<Backend>(raw.release(), [library](Backend* b) {
    backend_names::forget(b);
    delete b;
  });
}

}  // namespace commhost
