// SPDX-License-Identifier: Apache-2.0
#include "commhost/registry.h"

#include <boost/dll/runtime_symbol_info.hpp>
#include <boost/dll/shared_library.hpp>
#include <boost/filesystem.hpp>

#include <cxxabi.h>
#include <dlfcn.h>
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <memory>

#include "../config/environment.h"
#include "builtin.h"
#include "commhost/errors.h"

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

}  // namespace

const char* pluginKindName(PluginKind kind) {
  switch (kind) {
    case PluginKind::Backend: return "backend";
    case PluginKind::Store: return "store";
    case PluginKind::CommHook: return "comm_hook";
  }
  return "?";
}

PluginRegistry::PluginRegistry() {
  for (const PluginDescriptor* d : builtinPlugins())
    entries_.push_back({"<built-in>", d->name, d, "", nullptr, kBuildFingerprint});
}

std::vector<std::string> PluginRegistry::searchPath(const std::vector<std::string>& configPaths) {
  std::vector<std::string> dirs = configPaths;
  for (const auto& d : config::pluginPathFromEnv()) dirs.push_back(d);
  // libcommhost lives in <prefix>/lib (build and install trees alike); plugins beside it.
  const auto self = boost::filesystem::canonical(boost::dll::this_line_location());
  dirs.push_back((self.parent_path() / "commhost" / "plugins").string());
  return dirs;
}

PluginEntry PluginRegistry::open(const std::string& path) const {
  PluginEntry entry;
  entry.path = path;
  entry.name = nameFromFile(path);
  // Boost reports a missing file as "Bad file descriptor" and keeps no dlerror() text:
  // the file is checked here and dlopen's own reason is kept, symbols demangled.
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    entry.unavailable = "does not exist (no such file); check the path";
    return entry;
  }
  // RTLD_NODELETE keeps the code mapped until the process exits, even after the last
  // handle closes: exceptions, vtables and strings a plugin created may outlive every
  // object of it (an error caught after its group is gone, for one).
  if (!::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE)) {
    const char* why = ::dlerror();
    entry.unavailable = "cannot be loaded (a library or symbol it needs may be missing): " +
                        demangled(why ? why : "unknown dlopen error");
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
  if (header.magic != kPluginMagic) {
    entry.unavailable = "has a malformed plugin header (bad magic); rebuild it against this commhost";
    return entry;
  }
  if (header.abiMajor != COMMHOST_ABI_MAJOR || header.abiMinor > COMMHOST_ABI_MINOR) {
    entry.unavailable = "was built for plugin ABI " + abiString(header.abiMajor, header.abiMinor) +
                        " but this commhost " COMMHOST_VERSION " has ABI " +
                        abiString(COMMHOST_ABI_MAJOR, COMMHOST_ABI_MINOR) +
                        "; rebuild the plugin against this commhost";
    return entry;
  }
  // Same ABI version, but built with another standard library, other flags or other
  // headers: the structs that cross the boundary would be misread, so nothing in the
  // plugin may be called. Only the header's plain data is read before this point.
  entry.build = header.build;
  const std::string differences = abiDifferences(header.build, kBuildFingerprint, header.abiMinor);
  if (!differences.empty()) {
    entry.unavailable = "was built with a C++ ABI that does not match this commhost's (" + differences +
                        "), so the objects that cross the plugin boundary would be misread. Plugin: " +
                        describe(header.build) + ". commhost " COMMHOST_VERSION ": " + describe(kBuildFingerprint) +
                        ". Rebuild the plugin with the toolchain and flags commhost was built with: " +
                        describeToolchain(kBuildFingerprint) +
                        " (the same -D_GLIBCXX_USE_CXX11_ABI, no _GLIBCXX_DEBUG, no struct packing flags)";
    return entry;
  }
  const PluginDescriptor* d = header.descriptor;
  if (d && (d->magic != kPluginDescriptorMagic ||
            d->abiVersion != (uint32_t(header.abiMajor) << 16 | header.abiMinor) || d->size != header.descriptorSize)) {
    entry.unavailable =
        "has a descriptor whose prefix does not match its header (magic, ABI version or size); "
        "declare it as {COMMHOST_DESCRIPTOR_PREFIX, kind, name, ...} and rebuild it against this commhost";
    return entry;
  }
  if (!d || !d->name || !*d->name) {
    entry.unavailable = "has an empty descriptor (no name)";
    return entry;
  }
  const bool hasFactory = (d->kind == PluginKind::Backend && d->createBackend) ||
                          (d->kind == PluginKind::Store && d->createStore) ||
                          (d->kind == PluginKind::CommHook && d->createCommHook);
  entry.name = d->name;
  if (!hasFactory) {
    entry.unavailable = std::string("declares kind ") + pluginKindName(d->kind) + " but no " + pluginKindName(d->kind) +
                        " factory";
    return entry;
  }
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

void PluginRegistry::scan(const std::vector<std::string>& directories) {
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
    for (const auto& file : files) {
      PluginEntry entry = open(file);
      if (const PluginEntry* first = find(entry.name); first && entry.descriptor) {
        entry.unavailable = "duplicate: a plugin named '" + entry.name + "' was already loaded from " + first->path;
        entry.descriptor = nullptr;
        entry.library.reset();
      }
      entries_.push_back(std::move(entry));
    }
  }
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
