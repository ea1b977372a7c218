// SPDX-License-Identifier: Apache-2.0
// Rendering and comparing build fingerprints (commhost/sdk/abi.h).
#include "commhost/sdk/abi.h"

#include <algorithm>
#include <cstdio>

namespace commhost {

const char* boundaryTypeName(BoundaryType type) {
  switch (type) {
    case BoundaryType::Pointer: return "void*";
    case BoundaryType::String: return "std::string";
    case BoundaryType::Vector: return "std::vector";
    case BoundaryType::SharedPtr: return "std::shared_ptr";
    case BoundaryType::UniquePtr: return "std::unique_ptr";
    case BoundaryType::Function: return "std::function";
    case BoundaryType::ExceptionPtr: return "std::exception_ptr";
    case BoundaryType::Milliseconds: return "std::chrono::milliseconds";
    case BoundaryType::PluginDescriptor: return "PluginDescriptor";
    case BoundaryType::BackendContext: return "BackendContext";
    case BoundaryType::StoreContext: return "StoreContext";
    case BoundaryType::CommHookContext: return "CommHookContext";
    case BoundaryType::OpContext: return "OpContext";
    case BoundaryType::OptionSpec: return "OptionSpec";
    case BoundaryType::OptionValues: return "OptionValues";
    case BoundaryType::Capabilities: return "Capabilities";
    case BoundaryType::Tensor: return "Tensor";
    case BoundaryType::Device: return "Device";
    case BoundaryType::ReduceOp: return "ReduceOp";
    case BoundaryType::AlltoallSingleOptions: return "AlltoallSingleOptions";
    case BoundaryType::Error: return "Error";
    case BoundaryType::ErrorContext: return "ErrorContext";
    case BoundaryType::Future: return "Future";
    case BoundaryType::GradBucket: return "GradBucket";
    case BoundaryType::Backend: return "Backend";
    case BoundaryType::WorkQueue: return "WorkQueue";
    case BoundaryType::SplitRequest: return "SplitRequest";
    case BoundaryType::CompletedWork: return "CompletedWork";
    case BoundaryType::AsyncWork: return "AsyncWork";
    case BoundaryType::TunerContext: return "TunerContext";
    case BoundaryType::TuneQuery: return "TuneQuery";
    case BoundaryType::TuneCandidate: return "TuneCandidate";
  }
  return "?";
}

namespace {

std::string stdlibText(const BuildFingerprint& fp) {
  switch (fp.stdlib) {
    case StdLib::LibStdCxx:
      return "libstdc++ " + std::to_string(fp.stdlibVersion) +
             " (_GLIBCXX_USE_CXX11_ABI=" + std::to_string(fp.cxx11Abi) + ")";
    case StdLib::LibCxx: return "libc++ " + std::to_string(fp.stdlibVersion);
    case StdLib::Unknown: break;
  }
  return "an unknown C++ standard library";
}

std::string compilerText(const BuildFingerprint& fp) {
  switch (fp.compiler) {
    case CompilerFamily::Gcc: return "gcc " + std::to_string(fp.compilerMajor);
    case CompilerFamily::Clang: return "clang " + std::to_string(fp.compilerMajor);
    case CompilerFamily::Unknown: break;
  }
  return "an unknown compiler";
}

std::string layoutText(TypeLayout l) { return std::to_string(l.size) + "/" + std::to_string(l.align); }

}  // namespace

std::string describeToolchain(const BuildFingerprint& fp) { return stdlibText(fp) + ", " + compilerText(fp); }

std::string describe(const BuildFingerprint& fp) {
  std::string out = describeToolchain(fp) + "; size/alignment:";
  const int n = std::min(fp.layoutCount(), kNumBoundaryTypes);
  for (int i = 0; i < n; ++i)
    out += std::string(i ? ", " : " ") + boundaryTypeName(static_cast<BoundaryType>(i)) + " " +
           layoutText(fp.layouts[i]);
  return out;
}

// Refused: what changes how the two sides read each other's objects. Not refused:
// - the compiler: gcc and clang (any major) built against the same libstdc++ lay out
//   and mangle everything that crosses alike (the Itanium C++ ABI), which is how
//   distributions mix them; a real difference shows in the layouts anyway.
// - the standard library's version: libstdc++ and libc++ keep their ABI across
//   releases; the process runs one copy, the newest any object needs, and a plugin that
//   needs a newer one than the system has fails to load with the missing symbol version.
std::string abiDifferences(const BuildFingerprint& plugin, const BuildFingerprint& host, uint32_t pluginMinor) {
  std::string out;
  auto add = [&out](const std::string& line) { out += (out.empty() ? "" : "; ") + line; };
  if (plugin.stdlib != host.stdlib)
    add("standard library: " + stdlibText(plugin) + " in the plugin, " + stdlibText(host) + " in commhost");
  else if (plugin.stdlib == StdLib::LibStdCxx && plugin.cxx11Abi != host.cxx11Abi)
    add("_GLIBCXX_USE_CXX11_ABI: " + std::to_string(plugin.cxx11Abi) + " in the plugin, " +
        std::to_string(host.cxx11Abi) + " in commhost");
  const int n = std::min({plugin.layoutCount(), host.layoutCount(), kNumBoundaryTypes});
  const uint32_t hostMinor = COMMHOST_ABI_MINOR;
  // A minor's list of types is frozen once released, so within one minor another count
  // means the plugin was built from that minor's headers before a type was added (while
  // it was unreleased): a type it allocates may have changed without its layout on record.
  if (pluginMinor == hostMinor && plugin.layoutCount() != host.layoutCount())
    add("boundary types on record: " + std::to_string(plugin.layoutCount()) + " in the plugin, " +
        std::to_string(host.layoutCount()) + " in commhost (the plugin was built from other headers of this ABI)");
  for (int i = 0; i < n; ++i) {
    const auto type = static_cast<BoundaryType>(i);
    const TypeLayout p = plugin.layouts[i];
    const TypeLayout h = host.layouts[i];
    // A plugin built for an older minor has the descriptor and factory contexts without
    // the fields later minors appended (abi.h, mayGrowInMinor); the prefix's `size` tells
    // the host which it has. Every other type must match exactly.
    const bool olderStruct = mayGrowInMinor(type) && pluginMinor < hostMinor && p.size < h.size;
    if ((p.size != h.size && !olderStruct) || p.align != h.align)
      add(std::string(boundaryTypeName(type)) + ": " + layoutText(p) + " bytes/alignment in the plugin, " +
          layoutText(h) + " in commhost");
  }
  return out;
}

std::string interfaceDifferences(const InterfaceHashes& plugin, const InterfaceHashes& host) {
  std::string out;
  const auto compare = [&out](const char* name, uint64_t p, uint64_t h) {
    if (p == h) return;
    char text[96];
    std::snprintf(text, sizeof(text), "%s (plugin 0x%016llx, commhost 0x%016llx)", name,
                  static_cast<unsigned long long>(p), static_cast<unsigned long long>(h));
    out += (out.empty() ? "" : ", ") + std::string(text);
  };
  compare("Backend", plugin.backend, host.backend);
  compare("Store", plugin.store, host.store);
  compare("Work", plugin.work, host.work);
  compare("CommHook", plugin.commHook, host.commHook);
  compare("Tuner", plugin.tuner, host.tuner);
  return out;
}

}  // namespace commhost
