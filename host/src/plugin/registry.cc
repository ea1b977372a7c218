// SPDX-License-Identifier: Apache-2.0
#include "commhost/registry.h"

#include <boost/dll/runtime_symbol_info.hpp>
#include <boost/dll/shared_library.hpp>
#include <boost/filesystem.hpp>

#include <cxxabi.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>

#include "../config/environment.h"
#include "builtin.h"
#include "commhost/errors.h"
#include "file_checks.h"

namespace commhost {
namespace {

constexpr const char* kFilePrefix = "libcommhost_";
constexpr const char* kFileSuffix = ".so";

bool isPluginFile(const std::string& filename) {
  return filename.rfind(kFilePrefix, 0) == 0 && filename.size() > 15 &&
         filename.compare(filename.size() - 3, 3, kFileSuffix) == 0;
}

// libcommhost_gloo.so -> gloo: the name we can still show when the file does not load.
std::string nameFromFile(const std::string& path) {
  std::string file = boost::filesystem::path(path).filename().string();
  if (file.rfind(kFilePrefix, 0) == 0) file = file.substr(std::string(kFilePrefix).size());
  const size_t dot = file.find(".so");
  return dot == std::string::npos ? file : file.substr(0, dot);
}

std::string abiString(unsigned major, unsigned minor) { return std::to_string(major) + "." + std::to_string(minor); }

// dlerror() names an undefined symbol by its mangled name ("undefined symbol:
// _ZN3foo3barEi"); an author needs the C++ name to find the missing definition. Each
// _Z... token becomes "foo::bar(int) (_ZN3foo3barEi)", the mangled form kept for nm.
std::string demangled(const std::string& text) {
  std::string out;
  size_t i = 0;
  while (i < text.size()) {
    const size_t start = text.find("_Z", i);
    const bool atWordStart = start != std::string::npos &&
                             (start == 0 ||
                              !(std::isalnum(static_cast<unsigned char>(text[start - 1])) || text[start - 1] == '_'));
    if (start == std::string::npos) {
      out += text.substr(i);
      break;
    }
    size_t end = start;
    while (end < text.size() && (std::isalnum(static_cast<unsigned char>(text[end])) || text[end] == '_' ||
                                 text[end] == '.' || text[end] == '$'))
      ++end;
    out += text.substr(i, start - i);
    const std::string token = text.substr(start, end - start);
    int status = -1;
    std::unique_ptr<char, void (*)(void*)> name(
        atWordStart ? abi::__cxa_demangle(token.c_str(), nullptr, nullptr, &status) : nullptr, std::free);
    out += status == 0 && name ? std::string(name.get()) + " (" + token + ")" : token;
    i = end;
  }
  return out;
}

// A dlopen failure on a commhost symbol that takes the pre-C++11 std::string (demangled
// "std::string"; libcommhost's own, with _GLIBCXX_USE_CXX11_ABI=1, demangle to
// "std::__cxx11::basic_string"): the plugin was built with _GLIBCXX_USE_CXX11_ABI=0, which
// dlopen reports only as an undefined symbol. "" when `text` is something else.
std::string dualAbiProblem(const std::string& text) {
#if _GLIBCXX_USE_CXX11_ABI
  constexpr const char* kUndefined = "undefined symbol: ";
  const size_t at = text.find(std::string(kUndefined) + "commhost::");
  if (at == std::string::npos) return "";
  const size_t from = at + std::strlen(kUndefined);
  const std::string symbol = text.substr(from, text.find(" (_Z", from) - from);
  if (symbol.find("std::string") == std::string::npos || symbol.find("__cxx11") != std::string::npos) return "";
  return "was built with _GLIBCXX_USE_CXX11_ABI=0: it calls " + symbol +
         " with the pre-C++11 std::string, but libcommhost uses _GLIBCXX_USE_CXX11_ABI=1 and defines no such "
         "function; rebuild the plugin without -D_GLIBCXX_USE_CXX11_ABI=0 (dlopen: " +
         text + ")";
#else
  (void)text;
  return "";
#endif
}

int64_t wallMicros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// A 64-bit FNV-1a style hash of a file's bytes, optionally copying them to `copyTo` on the way.
// Returns "" and sets `why` when a read or write fails.
std::string hashAndCopy(const std::string& path, int copyTo, std::string* why) {
  const int in = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (in < 0) {
    *why = "cannot be read: " + std::string(std::strerror(errno));
    return "";
  }
  uint64_t h = 1469598103934665603ull;
  char buf[1 << 16];
  for (;;) {
    // The buffer is filled before hashing, so words never straddle a short read and the
    // hash depends on the bytes alone.
    ssize_t n = 0;
    while (n < static_cast<ssize_t>(sizeof buf)) {
      const ssize_t got = ::read(in, buf + n, sizeof buf - static_cast<size_t>(n));
      if (got < 0 && errno == EINTR) continue;
      if (got < 0) {
        *why = "cannot be read: " + std::string(std::strerror(errno));
        ::close(in);
        return "";
      }
      if (got == 0) break;
      n += got;
    }
    if (n == 0) break;
    // FNV-1a over 8-byte words (then the tail bytes): one multiply per word keeps a
    // reconfigure that hashes a few MB of plugins in the low milliseconds.
    ssize_t i = 0;
    for (; i + 8 <= n; i += 8) {
      uint64_t word;
      std::memcpy(&word, buf + i, 8);
      h = (h ^ word) * 1099511628211ull;
    }
    for (; i < n; ++i) h = (h ^ static_cast<unsigned char>(buf[i])) * 1099511628211ull;
    for (ssize_t done = 0; copyTo >= 0 && done < n;) {
      const ssize_t w = ::write(copyTo, buf + done, static_cast<size_t>(n - done));
      if (w < 0 && errno == EINTR) continue;
      if (w < 0) {
        *why = "cannot be copied for loading: " + std::string(std::strerror(errno));
        ::close(in);
        return "";
      }
      done += w;
    }
  }
  ::close(in);
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return hex;
}

// A private copy of `path` under a name no loaded object has, or "" with `why`.
//
// Why a copy: dlopen() hands back the object already loaded for a path (glibc matches
// the name, then the device and inode, before mapping anything), so opening the rebuilt
// file by its own name would return the old build. A copy with a unique name and inode
// is a new object to the loader and gets its own mapping. The caller unlinks the copy as
// soon as it is loaded: a mapping needs no name, so nothing is left on disk.
// Where: beside the original (a dot name, which scans skip), so $ORIGIN in its RPATH finds
// the same libraries; in the temp directory when that folder is not writable.
std::string privateCopy(const std::string& path, std::string* hash, std::string* why) {
  namespace fs = boost::filesystem;
  const fs::path original(path);
  const std::string stem = "." + original.filename().string() + ".reload-XXXXXX";
  boost::system::error_code ec;
  for (const fs::path& dir : {original.parent_path(), fs::temp_directory_path(ec)}) {
    if (dir.empty()) continue;
    std::string name = (dir / stem).string();
    const int fd = ::mkstemp(name.data());
    if (fd < 0) continue;
    *hash = hashAndCopy(path, fd, why);
    ::close(fd);
    if (hash->empty()) {
      ::unlink(name.c_str());
      return "";
    }
    return name;
  }
  *why = "cannot be copied for loading: neither its folder nor the temp directory is writable";
  return "";
}

}  // namespace

const char* pluginKindName(PluginKind kind) {
  switch (kind) {
    case PluginKind::Backend: return "backend";
    case PluginKind::Store: return "store";
    case PluginKind::CommHook: return "comm_hook";
    case PluginKind::Tuner: return "tuner";
  }
  return "?";
}

PluginRegistry::PluginRegistry() {
  for (const PluginDescriptor* d : builtinPlugins())
    entries_.push_back({"<built-in>", d->name, d, "", nullptr, kBuildFingerprint});
}

std::string libcommhostDirectory() {
  return boost::filesystem::canonical(boost::dll::this_line_location()).parent_path().string();
}

std::vector<std::string> PluginRegistry::searchPath(const std::vector<std::string>& configPaths) {
  std::vector<std::string> dirs = configPaths;
  for (const auto& d : config::pluginPathFromEnv()) dirs.push_back(d);
  dirs.push_back(libcommhostDirectory() + "/commhost/plugins");
  return dirs;
}

namespace {

// Why the header a plugin exports cannot be read here ("" when it can): its magic and ABI
// version. Only the header's plain data is read.
std::string headerProblem(const PluginHeader& header) {
  if (header.magic != kPluginMagic)
    return "has a malformed plugin header (bad magic); rebuild it against this commhost";
  if (header.abiMajor != COMMHOST_ABI_MAJOR || header.abiMinor > COMMHOST_ABI_MINOR)
    return "was built for plugin ABI " + abiString(header.abiMajor, header.abiMinor) +
           " but this commhost " COMMHOST_VERSION " has ABI " + abiString(COMMHOST_ABI_MAJOR, COMMHOST_ABI_MINOR) +
           "; rebuild the plugin against this commhost";
  return "";
}

// Same ABI version, but built with another standard library, other flags or other
// headers: the structs that cross the boundary would be misread, so nothing in the
// plugin may be called. "" when the build fingerprints match.
std::string buildProblem(const PluginHeader& header) {
  const std::string differences = abiDifferences(header.build, kBuildFingerprint, header.abiMinor);
  if (differences.empty()) return "";
  return "was built with a C++ ABI that does not match this commhost's (" + differences +
         "), so the objects that cross the plugin boundary would be misread. Plugin: " + describe(header.build) +
         ". commhost " COMMHOST_VERSION ": " + describe(kBuildFingerprint) +
         ". Rebuild the plugin with the toolchain and flags commhost was built with: " +
         describeToolchain(kBuildFingerprint) +
         " (the same -D_GLIBCXX_USE_CXX11_ABI, no _GLIBCXX_DEBUG, no struct packing flags)";
}

// The plugin's interface hashes. They follow its build fingerprint, whose size grows when
// a minor appends boundary types, so they sit where the plugin's own `build.size` puts
// them, not at this build's offsetof(PluginHeader, interfaces); and a hash the plugin's
// minor did not have yet is not read (it counts as equal: the plugin cannot implement an
// interface its headers lacked). Null when the fingerprint's size is not one a plugin of
// this major can have.
std::optional<InterfaceHashes> interfacesOf(const PluginHeader& header) {
  if (header.build.size < offsetof(BuildFingerprint, layouts) || header.build.size > sizeof(BuildFingerprint))
    return std::nullopt;
  constexpr size_t align = alignof(InterfaceHashes);
  const size_t at = (offsetof(PluginHeader, build) + header.build.size + align - 1) / align * align;
  const size_t known = header.abiMinor >= 1 ? 5 : 4;  // 3.1 added `tuner`
  InterfaceHashes theirs = kInterfaceHashes;
  std::memcpy(&theirs, reinterpret_cast<const char*>(&header) + at, known * sizeof(uint64_t));
  return theirs;
}

// Same layouts, but built against headers whose interfaces have other virtual functions:
// the host would call the wrong slot of the plugin's vtables. "" when they match.
std::string interfaceProblem(const PluginHeader& header) {
  const std::optional<InterfaceHashes> theirs = interfacesOf(header);
  if (!theirs)
    return "has a malformed plugin header (a build fingerprint of " + std::to_string(header.build.size) +
           " bytes); rebuild it against this commhost";
  const std::string differences = interfaceDifferences(*theirs, kInterfaceHashes);
  if (differences.empty()) return "";
  return "was built against commhost headers whose interfaces declare other virtual functions than this "
         "commhost's: " +
         differences +
         ". The host would call the wrong functions in it, so it is not loaded. Rebuild the plugin against the "
         "headers of this commhost " COMMHOST_VERSION
         " (its installed include/commhost); a header from another commhost build or an edited copy was used";
}

// Why the descriptor the header points to cannot be used ("" when it can). A pointer the
// plugin hands over is read only once it is known to be readable; `name` gets its name.
std::string descriptorProblem(const PluginHeader& header, std::string* name) {
  const PluginDescriptor* d = header.descriptor;
  // The size the plugin declares (an older minor's descriptor is shorter than this one),
  // and at least 3.0's, whose fields are read below.
  const size_t declared = std::max<size_t>(offsetof(PluginDescriptor, createTuner),
                                           std::min<size_t>(header.descriptorSize, sizeof(PluginDescriptor)));
  if (d && !plugin_checks::readable(d, declared))
    return "has a descriptor pointer that points at no readable memory; rebuild it against this commhost";
  if (d && (d->magic != kPluginDescriptorMagic ||
            d->abiVersion != (uint32_t(header.abiMajor) << 16 | header.abiMinor) || d->size != header.descriptorSize))
    return "has a descriptor whose prefix does not match its header (magic, ABI version or size); "
           "declare it as {COMMHOST_DESCRIPTOR_PREFIX, kind, name, ...} and rebuild it against this commhost";
  if (d && d->name && !plugin_checks::readableString(d->name, 256, name))
    return "has a descriptor whose name points at no readable string of at most 255 bytes";
  if (name->empty()) return "has an empty descriptor (no name)";
  std::string text;
  for (const char* field : {d->version, d->description, d->wrapName})
    if (field && !plugin_checks::readableString(field, 1 << 16, &text))
      return "has a descriptor whose version, description or wrap name points at no readable string";
  return "";
}

// "" when a readable descriptor has the factory its kind needs.
std::string factoryProblem(const PluginDescriptor& d) {
  const bool hasFactory = (d.kind == PluginKind::Backend && d.createBackend) ||
                          (d.kind == PluginKind::Store && d.createStore) ||
                          (d.kind == PluginKind::CommHook && d.createCommHook) ||
                          (d.kind == PluginKind::Tuner && hasTunerFactory(d));
  if (hasFactory) return "";
  return std::string("declares kind ") + pluginKindName(d.kind) + " but no " + pluginKindName(d.kind) + " factory";
}

// dlopen's reason for a file it refused, said for an author.
std::string dlopenProblem() {
  const char* why = ::dlerror();
  const std::string text = demangled(why ? why : "unknown dlopen error");
  const std::string dualAbi = dualAbiProblem(text);
  return dualAbi.empty() ? "cannot be loaded (a library or symbol it needs may be missing): " + text : dualAbi;
}

}  // namespace

PluginEntry PluginRegistry::open(const std::string& path) const {
  PluginEntry entry;
  entry.path = path;
  entry.name = nameFromFile(path);
  // Boost reports a missing file as "Bad file descriptor" and keeps no dlerror() text:
  // the file is checked here and dlopen's own reason is kept, symbols demangled. Only a
  // whole ELF regular file reaches dlopen (file_checks.h: a FIFO blocked it forever, a
  // truncated file raised SIGBUS).
  off_t size = 0;
  entry.unavailable = plugin_checks::fileProblem(path, &size);
  if (entry.unavailable.empty()) entry.unavailable = plugin_checks::elfProblem(path, size);
  if (!entry.unavailable.empty()) return entry;
  entry.file = identityOf(path);
  entry.loadedAtUs = wallMicros();
  // RTLD_NODELETE keeps the code mapped until the process exits, even after the last
  // handle closes: exceptions, vtables and strings a plugin created may outlive every
  // object of it (an error caught after its group is gone, for one).
  if (!::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE)) {
    entry.unavailable = dlopenProblem();
    return entry;
  }
  std::shared_ptr<boost::dll::shared_library> lib;
  try {
    lib = std::make_shared<boost::dll::shared_library>(
        path, boost::dll::load_mode::rtld_now | boost::dll::load_mode::rtld_local);
  } catch (const std::exception& e) {
    entry.unavailable = std::string("cannot be loaded (a library it needs may be missing): ") + e.what();
    return entry;
  }
  if (!lib->has(kPluginSymbol)) {
    entry.unavailable = std::string("has no commhost plugin descriptor (symbol ") + kPluginSymbol +
                        " missing); declare one with COMMHOST_PLUGIN(descriptor)";
    return entry;
  }
  const auto& header = lib->get<const PluginHeader>(kPluginSymbol);
  entry.unavailable = headerProblem(header);
  if (!entry.unavailable.empty()) return entry;
  // Only the plugin's own fingerprint: an older minor's holds fewer layouts, and what
  // follows it in its header is not a fingerprint.
  std::memcpy(&entry.build, &header.build, std::min<size_t>(header.build.size, sizeof(BuildFingerprint)));
  entry.unavailable = buildProblem(header);
  if (!entry.unavailable.empty()) return entry;
  entry.unavailable = interfaceProblem(header);
  if (!entry.unavailable.empty()) return entry;
  std::string name;
  entry.unavailable = descriptorProblem(header, &name);
  if (!entry.unavailable.empty()) return entry;
  const PluginDescriptor* d = header.descriptor;
  entry.name = name;
  entry.unavailable = factoryProblem(*d);
  if (!entry.unavailable.empty()) return entry;
  entry.descriptor = d;
  entry.library = lib;
  if (d->probe) {
    try {
      entry.unavailable = d->probe();
    } catch (const std::exception& e) {
      entry.unavailable = std::string("its availability check failed: ") + e.what();
    }
  }
  return entry;
}

void PluginRegistry::scan(const std::vector<std::string>& directories) { scan(directories, nullptr); }

void PluginRegistry::scan(const std::vector<std::string>& directories, const Precheck& precheck) {
  list(directories);
  for (Candidate& c : candidates_)
    if (!c.opened) openCandidate(c, precheck);
}

void PluginRegistry::scanFor(const std::vector<std::string>& directories, const std::vector<std::string>& names) {
  list(directories);
  openFor(names);
}

void PluginRegistry::openFor(const std::vector<std::string>& names) {
  bool missing = false;
  for (const std::string& name : names) {
    if (find(name)) continue;
    for (Candidate& c : candidates_)
      if (!c.opened && c.name == name) {
        openCandidate(c, nullptr);
        break;
      }
    missing = missing || !find(name);
  }
  if (!missing) return;
  for (Candidate& c : candidates_)
    if (!c.opened) openCandidate(c, nullptr);
}

void PluginRegistry::list(const std::vector<std::string>& directories) {
  namespace fs = boost::filesystem;
  for (const auto& dir : directories) {
    boost::system::error_code ec;
    const std::string canonical = fs::weakly_canonical(dir, ec).string();
    if (std::find(scanned_.begin(), scanned_.end(), canonical) != scanned_.end()) continue;
    scanned_.push_back(canonical);
    std::vector<std::string> files;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
      if (isPluginFile(it->path().filename().string())) files.push_back(it->path().string());
    std::sort(files.begin(), files.end());
    for (auto& file : files) candidates_.push_back({file, nameFromFile(file), false});
  }
}

void PluginRegistry::openCandidate(Candidate& candidate, const Precheck& precheck) {
  candidate.opened = true;
  const std::string refused = precheck ? precheck(candidate.path) : std::string();
  PluginEntry entry;
  if (refused.empty()) {
    entry = open(candidate.path);
  } else {
    entry.path = candidate.path;
    entry.name = candidate.name;
    entry.unavailable = refused;
  }
  if (const PluginEntry* first = find(entry.name); first && entry.descriptor) {
    entry.unavailable = "duplicate: a plugin named '" + entry.name + "' was already loaded from " + first->path;
    entry.descriptor = nullptr;
    entry.library.reset();
  }
  entries_.push_back(std::move(entry));
}

const PluginEntry& PluginRegistry::loadFile(const std::string& path) {
  PluginEntry entry = open(path);
  if (!entry.descriptor) throw PluginError("plugin " + path + " " + entry.unavailable);
  if (const PluginEntry* first = find(entry.name))
    throw PluginError("plugin " + path + " is named '" + entry.name + "', which " + first->path +
                      " already provides; remove one of them or rename it");
  entries_.push_back(std::move(entry));
  return entries_.back();
}

PluginEntry::FileIdentity PluginRegistry::identityOf(const std::string& path) {
  PluginEntry::FileIdentity id;
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return id;  // size -1: missing
  id.device = st.st_dev;
  id.inode = st.st_ino;
  id.size = st.st_size;
  id.mtimeNs = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  return id;
}

PluginEntry* PluginRegistry::findMutable(const std::string& name) {
  for (auto& e : entries_)
    if (e.name == name) return &e;
  return nullptr;
}

bool PluginRegistry::changedOnDisk(const std::string& name) const {
  const PluginEntry* e = find(name);
  if (!e || e->path == "<built-in>") return false;
  return identityOf(e->path) != e->file;
}

std::string PluginRegistry::fileHash(const std::string& name) const {
  const PluginEntry* e = find(name);
  if (!e) return "none";
  if (e->path == "<built-in>") return "built-in";
  if (!e->contentHash.empty()) return e->contentHash;
  std::string why;
  const std::string h = hashAndCopy(e->path, -1, &why);
  return h.empty() ? "unreadable" : h;
}

bool PluginRegistry::reload(const std::string& name) {
  PluginEntry* old = findMutable(name);
  if (!old)
    throw PluginError("plugin '" + name + "' cannot be reloaded: it was never loaded; searched: " + describeSearched());
  if (old->path == "<built-in>")
    throw PluginError("plugin '" + name + "' is built into commhost and cannot be reloaded");
  // The identity is taken before the copy: a file replaced in between is loaded in its
  // newer form and noticed again next time, never missed.
  const PluginEntry::FileIdentity now = identityOf(old->path);
  if (now == old->file) return false;
  const std::string keeps = "; plugin '" + name + "' keeps the build loaded before";
  if (now.size < 0)
    throw PluginError("plugin '" + name + "' cannot be reloaded: " + old->path + " no longer exists" + keeps);
  std::string hash, why;
  const std::string copy = privateCopy(old->path, &hash, &why);
  if (copy.empty()) throw PluginError("plugin " + old->path + " " + why + keeps);
  PluginEntry entry = open(copy);
  ::unlink(copy.c_str());  // loaded (or refused): the copy's name is no longer needed
  entry.path = old->path;
  entry.file = now;
  entry.contentHash = hash;
  entry.reloads = old->reloads + 1;
  if (!entry.descriptor || !entry.unavailable.empty())
    throw PluginError("plugin " + old->path + " changed on disk but the new file " +
                      (entry.unavailable.empty() ? std::string("did not load") : entry.unavailable) + keeps);
  const PluginKind wantKind = old->descriptor ? old->descriptor->kind : entry.descriptor->kind;
  if (entry.name != name || entry.descriptor->kind != wantKind)
    throw PluginError("plugin " + old->path + " changed on disk and now declares " +
                      pluginKindName(entry.descriptor->kind) + " plugin '" + entry.name + "', not " +
                      pluginKindName(wantKind) + " plugin '" + name + "'; a reload must keep the name and kind" +
                      keeps);
  // In place: entries never move, and the old build's library stays held by whatever
  // was created from it (each object's deleter has its own reference).
  *old = std::move(entry);
  return true;
}

std::string PluginRegistry::describeSearched() const {
  std::string out;
  for (const auto& dir : scanned_) {
    boost::system::error_code ec;
    out += (out.empty() ? "" : ", ") + dir + (boost::filesystem::is_directory(dir, ec) ? "" : " (missing)");
  }
  return out.empty() ? "no folder" : out;
}

const PluginEntry* PluginRegistry::find(const std::string& name) const {
  for (const auto& e : entries_)
    if (e.name == name) return &e;
  return nullptr;
}

const PluginEntry& PluginRegistry::require(const std::string& name, PluginKind kind) const {
  const PluginEntry* e = find(name);
  if (!e) {
    std::vector<std::string> names;
    std::string list;
    for (const auto& entry : entries_)
      if (entry.descriptor && entry.descriptor->kind == kind) {
        names.push_back(entry.name);
        list += (list.empty() ? "" : ", ") + entry.name;
      }
    const std::string hint = closestMatch(name, names);
    throw PluginError(std::string(pluginKindName(kind)) + " plugin '" + name + "' not found" +
                      (hint.empty() ? "" : " (did you mean '" + hint + "'?)") +
                      "; available: " + (list.empty() ? "none" : list) + "; searched: " + describeSearched() +
                      ". Run `commhost plugins list` to see what was found");
  }
  if (!e->descriptor || !e->unavailable.empty())
    throw PluginError(std::string(pluginKindName(kind)) + " plugin '" + name + "' (" + e->path +
                      ") is unavailable: " + e->unavailable);
  if (e->descriptor->kind != kind)
    throw PluginError("plugin '" + name + "' is a " + pluginKindName(e->descriptor->kind) + " plugin, not a " +
                      pluginKindName(kind) + " plugin");
  return *e;
}

}  // namespace commhost
