// SPDX-License-Identifier: Apache-2.0
// Internal: creating one configured backend for one group, both a group's own backends
// (ProcessGroup::Impl::buildState) and the sub-backends a composite backend asks for through
// BackendContext::makeBackend (e.g. hier's per-host and leader groups).
#pragma once

#include <memory>
#include <string>

#include "commhost/config.h"
#include "commhost/registry.h"

namespace commhost {

// Where a backend is created: its group, its place in it and its private store.
struct BackendSite {
  std::string group;  // the group's name, as errors and the backend see it
  int rank = 0;
  int worldSize = 1;
  StorePtr store;  // private to this backend in this group (already prefixed)
  int depth = 0;   // composite nesting: 0 for a group's own backends
  // A subgroup's backend: what the parent's backend of the same name prepared for it
  // (Backend::prepareSplit), handed to the factory as BackendContext::splitFrom.
  std::shared_ptr<void> splitFrom;
};

// Creates `cfg.backends[name]` at `site`: the plugin's factory with a BackendContext whose
// makeBackend creates further backends of `cfg` below it. Throws PluginError naming the
// backend, its plugin and file when the factory fails or returns nothing, and ConfigError
// when `name` is unknown or the plugin unusable. `composite`, when given, is set when the
// factory created sub-backends (such a backend is never kept across a swap: its parts
// may have changed while its own entry did not). The deleter holds the plugin loaded.
std::shared_ptr<Backend> createConfiguredBackend(const Config& cfg, const PluginRegistry& registry,
                                                 const std::string& name, const BackendSite& site,
                                                 bool* composite = nullptr);

}  // namespace commhost
