// SPDX-License-Identifier: Apache-2.0
// makeCommHook: the hook a group's config names (hooks.<name>), wrapper included.
#include <map>
#include <optional>
#include <string>
#include <utility>

#include "commhost/errors.h"
#include "commhost/process_group.h"
#include "commhost/registry.h"
#include "commhost/sdk/comm_hook.h"
#include "commhost/sdk/plugin.h"

namespace commhost {
namespace {

// The default when hooks.<name> is not configured: c10d's default hook, the average.
constexpr const char* kDefaultHookPlugin = "allreduce";

std::shared_ptr<CommHook> create(ProcessGroup& group, const PluginRegistry& registry, const std::string& hookName,
                                 const std::string& plugin, const OptionValues& options, const std::string& where,
                                 std::shared_ptr<CommHook> inner) {
  const ErrorContext at{group.name(), group.rank()};
  const PluginEntry* entry = nullptr;
  try {
    entry = &registry.require(plugin, PluginKind::CommHook);
  } catch (const Error& e) {
    raise(ErrorCode::Plugin, at, "comm hook '" + hookName + "' needs plugin '" + plugin + "': " + e.what(),
          where.empty() ? "build or install the hook plugins (plugins/hooks), or configure hooks." + hookName
                        : "fix the entry at " + where);
  }
  CommHookContext ctx;
  ctx.rank = group.rank();
  ctx.worldSize = group.size();
  ctx.logger = std::make_shared<Logger>("commhost." + plugin,
                                        "group " + group.name() + " rank " + std::to_string(group.rank()));
  ctx.inner = std::move(inner);
  std::unique_ptr<CommHook> raw;
  try {
    raw = entry->descriptor->createCommHook(options, ctx);
  } catch (const std::exception& ex) {
    raise(ErrorCode::Plugin, at,
          "comm hook '" + hookName + "' (plugin " + plugin + " from " + entry->path + ") failed to start: " + ex.what(),
          where.empty() ? "check the plugin's options with `commhost plugins inspect " + plugin + "`"
                        : "fix its options at " + where);
  }
  if (!raw) raise(ErrorCode::Plugin, at, "plugin " + plugin + " returned no comm hook", "report it to its author");
  // The deleter holds the library, so the plugin's code outlives the object.
  std::shared_ptr<void> library = entry->library;
  return std::shared_ptr<CommHook>(raw.release(), [library](CommHook* h) { delete h; });
}

OptionValues defaults(const PluginRegistry& registry, const std::string& plugin, const std::string& where) {
  const PluginEntry* e = registry.find(plugin);
  if (!e || !e->descriptor) return {};  // create() says why
  return resolveOptions(e->descriptor->options, {}, where);
}

}  // namespace

std::shared_ptr<CommHook> makeCommHook(ProcessGroup& group, const std::string& name) {
  const auto& hooks = group.config().hooks;
  const auto it = hooks.find(name);
  if (it == hooks.end()) {
    // No config names the default hook, so a job has not opened its plugin (a job opens
    // only what its config names): opened here, into a copy, since the group's registry is
    // shared and read without a lock. The hook holds its library; the copy may go.
    std::optional<PluginRegistry> widened;
    if (!group.registry().find(kDefaultHookPlugin)) {
      widened.emplace(group.registry());
      widened->openFor({kDefaultHookPlugin});
    }
    const PluginRegistry& registry = widened ? *widened : group.registry();
    return create(group, registry, name, kDefaultHookPlugin, defaults(registry, kDefaultHookPlugin, "the default hook"),
                  "", nullptr);
  }
  const PluginRef& ref = it->second;
  std::shared_ptr<CommHook> hook = create(group, group.registry(), name, ref.plugin, ref.options, ref.where, nullptr);
  if (ref.wrap.empty()) return hook;
  // The wrapper takes its default options: `wrap:` names it, the entry's options are the hook's.
  return create(group, group.registry(), name, ref.wrap, defaults(group.registry(), ref.wrap, ref.where + " (wrap)"),
                ref.where, std::move(hook));
}

}  // namespace commhost
