// SPDX-License-Identifier: Apache-2.0
// PluginRegistry: finds, loads and validates plugins.
//
// Search order: the config's plugin_path entries, then COMMHOST_PLUGIN_PATH (colon
// separated), then the directory installed beside libcommhost (lib/commhost/plugins),
// which is also where the build tree puts them. Files named libcommhost_<name>.so are
// considered. A file that fails to load is kept as an entry with its reason, so
// `commhost plugins list` can say why; a plugin whose probe fails is "unavailable".
//
// A loaded plugin's code stays mapped until the process exits (RTLD_NODELETE), so
// errors and objects it created stay valid after the registry and its groups are gone.
//
// Threading: load everything first (one thread), then the registry is read-only and
// may be shared.
#pragma once

#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "commhost/export.h"
#include "commhost/plugin.h"

namespace commhost {

struct PluginEntry {
  std::string path;                              // file it came from; "<built-in>" for host-provided ones
  std::string name;                              // from the descriptor, or the file name when it did not load
  const PluginDescriptor* descriptor = nullptr;  // null when it failed to load
  std::string unavailable;                       // "" when usable, else the reason (load failure or probe)
  std::shared_ptr<void> library;                 // keeps the shared object loaded
  BuildFingerprint build{};                      // how it was built; size 0 when its header could not be read
  bool usable() const { return descriptor != nullptr && unavailable.empty(); }
};

class COMMHOST_API PluginRegistry {
 public:
  PluginRegistry();  // holds the built-in plugins (the hash store)

  // The directories searched, in order, for the given config plugin_path entries.
  static std::vector<std::string> searchPath(const std::vector<std::string>& configPaths);
  // Scans every directory not scanned before; files that fail are recorded, not thrown.
  // A later file with an already-loaded name is recorded as a duplicate (the first wins).
  void scan(const std::vector<std::string>& directories);
  // Loads one file; throws PluginError with the path and reason (ABI, descriptor,
  // duplicate name, missing dependency) instead of recording it.
  const PluginEntry& loadFile(const std::string& path);

  // The entry for `name` of `kind`; throws PluginError listing what is available (with a
  // "did you mean") when there is none, or why it is unusable.
  const PluginEntry& require(const std::string& name, PluginKind kind) const;
  const PluginEntry* find(const std::string& name) const;
  const std::deque<PluginEntry>& entries() const { return entries_; }
  // The directories scanned so far, in order (canonical), for "not found" messages.
  const std::vector<std::string>& searched() const { return scanned_; }
  // searched() as "DIR, DIR (missing), ..." for messages; "no folder" when empty.
  std::string describeSearched() const;

 private:
  PluginEntry open(const std::string& path) const;
  std::deque<PluginEntry> entries_;   // deque: entries never move
  std::vector<std::string> scanned_;  // canonical directories already scanned
};

}  // namespace commhost
