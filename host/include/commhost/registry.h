// SPDX-License-Identifier: Apache-2.0
// PluginRegistry: finds, loads and validates plugins.
//
// Search order: the config's plugin_path entries, then COMMHOST_PLUGIN_PATH (colon
// separated), then the directory installed beside libcommhost (lib/commhost/plugins),
// which is also where the build tree puts them. Files named libcommhost_<name>.so are
// considered. A file that fails to load is kept as an entry with its reason, so
// `commhost plugins list` can say why; a plugin whose probe fails is "unavailable".
// scan() opens every file (what `plugins list` shows); a job's config loading uses
// scanFor(), which opens only the files of the plugins the config names, so a file on the
// path that the job does not use can neither hang, crash nor slow it.
//
// A loaded plugin's code stays mapped until the process exits (RTLD_NODELETE), so
// errors and objects it created stay valid after the registry and its groups are gone.
//
// Reload: reload(name) loads a rebuilt file under the same name (see PluginRegistry::reload).
// Each build stays mapped for the process's life (RTLD_NODELETE, as above), so whatever a
// replaced build created (backends, hooks, works, errors, option strings) stays valid;
// its entry's `library` still counts who holds it.
//
// Threading: load everything first (one thread), then the registry is read-only and
// may be shared. reload() changes an entry in place, so it needs the registry to itself:
// a group reloads into a copy of its registry (ProcessGroup::reconfigure), never into the
// one its peers or the application share.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "commhost/export.h"
#include "commhost/sdk/plugin.h"

namespace commhost {

struct PluginEntry {
  std::string path;                              // file it came from; "<built-in>" for host-provided ones
  std::string name;                              // from the descriptor, or the file name when it did not load
  const PluginDescriptor* descriptor = nullptr;  // null when it failed to load
  std::string unavailable;                       // "" when usable, else the reason (load failure or probe)
  std::shared_ptr<void> library;                 // keeps the shared object loaded
  BuildFingerprint build{};                      // how it was built; size 0 when its header could not be read
  // The file at `path` when it was loaded (to notice a rebuilt one), and its bytes' hash
  // when reload() loaded it ("" for a first load: fileHash() reads the file then).
  struct FileIdentity {
    uint64_t device = 0, inode = 0;
    int64_t size = -1, mtimeNs = 0;
    bool operator==(const FileIdentity& o) const {
      return device == o.device && inode == o.inode && size == o.size && mtimeNs == o.mtimeNs;
    }
    bool operator!=(const FileIdentity& o) const { return !(*this == o); }
  } file;
  std::string contentHash;
  uint32_t reloads = 0;    // how many times reload() replaced this name's build
  int64_t loadedAtUs = 0;  // wall clock (microseconds since the epoch) of the load
  bool usable() const { return descriptor != nullptr && unavailable.empty(); }
};

// The directory libcommhost was loaded from (lib/ of the build tree and of the install
// tree alike): the default plugin folder (commhost/plugins) and the CUDA modules opened on
// demand (libcommhost_cuda_casts.so, libcommhost_bench_cuda.so) are installed beside it.
COMMHOST_API std::string libcommhostDirectory();

class COMMHOST_API PluginRegistry {
 public:
  PluginRegistry();  // holds the built-in plugins (the hash store)

  // The directories searched, in order, for the given config plugin_path entries.
  static std::vector<std::string> searchPath(const std::vector<std::string>& configPaths);
  // Scans every directory not scanned before; files that fail are recorded, not thrown.
  // A later file with an already-loaded name is recorded as a duplicate (the first wins).
  void scan(const std::vector<std::string>& directories);
  // As scan(), but each candidate file goes to `precheck` first, which returns "" to load
  // it here or why it must not be (recorded as the entry's reason, the file never opened
  // in this process). `commhost plugins list` loads each file in a child process first, so
  // a file whose loading hangs or crashes is reported instead of taking the host down.
  using Precheck = std::function<std::string(const std::string& path)>;
  void scan(const std::vector<std::string>& directories, const Precheck& precheck);
  // What a job needs instead of scan(): lists the plugin files of every directory not
  // listed before and opens only those `names` need (openFor), so a file on the path that
  // the config does not name is never loaded and cannot hang, crash or slow the job.
  void scanFor(const std::vector<std::string>& directories, const std::vector<std::string>& names);
  // Opens, for each of `names` no entry holds yet, the first listed file named for it
  // (libcommhost_<name>.so, in search order). A name still missing after that (a plugin
  // whose file is named otherwise, a wrapper's wrapName, a typo) opens every listed file
  // not opened yet, as scan() does, so it is found, or "not found" can list all there is.
  void openFor(const std::vector<std::string>& names);
  // Loads one file; throws PluginError with the path and reason (ABI, descriptor,
  // duplicate name, missing dependency) instead of recording it.
  const PluginEntry& loadFile(const std::string& path);

  // Loads the file behind plugin `name` again when it changed on disk (inode, size or
  // mtime differ from the loaded one), with every check of a first load, and replaces the
  // entry: later lookups get the new build. Returns false, changing nothing, when the
  // file did not change. Throws PluginError saying why (and keeps the loaded build) when
  // the new file fails to load, fails the ABI checks, is unavailable, or now declares
  // another name or kind; also for a built-in plugin or a name not loaded.
  bool reload(const std::string& name);
  // Whether the file behind loaded plugin `name` differs from the one it was loaded from
  // (a missing file counts as changed).
  bool changedOnDisk(const std::string& name) const;
  // A hash (16 hex digits) of the bytes of `name`'s build: contentHash when reload()
  // loaded it, else read from its (unchanged) file; "built-in" for host-provided ones.
  std::string fileHash(const std::string& name) const;
  static PluginEntry::FileIdentity identityOf(const std::string& path);

  // The entry for `name` of `kind`; throws PluginError listing what is available (with a
  // "did you mean") when there is none, or why it is unusable.
  const PluginEntry& require(const std::string& name, PluginKind kind) const;
  const PluginEntry* find(const std::string& name) const;
  const std::deque<PluginEntry>& entries() const { return entries_; }
  // The directories listed so far, in order (canonical), for "not found" messages.
  const std::vector<std::string>& searched() const { return scanned_; }
  // searched() as "DIR, DIR (missing), ..." for messages; "no folder" when empty.
  std::string describeSearched() const;

 private:
  // A plugin file found in a listed directory, and whether it has been opened.
  struct Candidate {
    std::string path;
    std::string name;  // from the file name: libcommhost_gloo.so -> gloo
    bool opened = false;
  };
  PluginEntry open(const std::string& path) const;
  void list(const std::vector<std::string>& directories);
  void openCandidate(Candidate& candidate, const Precheck& precheck);
  PluginEntry* findMutable(const std::string& name);
  std::deque<PluginEntry> entries_;    // deque: entries never move
  std::vector<std::string> scanned_;   // canonical directories already listed
  std::vector<Candidate> candidates_;  // their plugin files, in search order
};

}  // namespace commhost
