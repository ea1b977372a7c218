// SPDX-License-Identifier: Apache-2.0
// The plugin ABI's version numbers, struct prefixes and build fingerprint.
//
// Frozen within an ABI major: every struct that crosses the plugin boundary
// (PluginDescriptor, BackendContext, StoreContext, CommHookContext, OpContext,
// SplitRequest, TunerContext, TuneQuery) begins
// with the same three fields, as NCCL's ncclConfig_t does:
//
//   uint32_t size;     sizeof(the struct) where it was built. A later minor version
//                      only appends fields, so a reader uses a field only when `size`
//                      covers it (offsetof(T, field) + sizeof(field) <= size).
//   uint32_t magic;    one constant per struct (k*Magic below): a pointer to the wrong
//                      thing, or memory that was never a commhost struct, shows here.
//   uint32_t version;  kAbiVersion of the build that filled it: (major << 16) | minor.
//
// The loader refuses a plugin of another ABI major or a newer minor, so a host always
// fills contexts at least as new as the plugin knows, and only the descriptor (filled
// by the plugin) can be older than the host reading it. A plugin that copies a context
// keeps only the fields it was built with: read `size` on the reference it was given.
//
// The build fingerprint records what decides whether two builds agree on the layout of
// those structs and of the standard library types inside them; see BuildFingerprint.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "commhost/export.h"
#include "commhost/sdk/interface_hashes.h"
#include "commhost/version.h"

namespace commhost {

constexpr uint32_t kAbiVersion = (static_cast<uint32_t>(COMMHOST_ABI_MAJOR) << 16) | COMMHOST_ABI_MINOR;
constexpr uint32_t abiMajorOf(uint32_t version) { return version >> 16; }
constexpr uint32_t abiMinorOf(uint32_t version) { return version & 0xffff; }

// The `magic` of each struct's prefix ("CH" + two letters, little-endian in memory).
constexpr uint32_t kPluginDescriptorMagic = 0x44504843;  // "CHPD"
constexpr uint32_t kBackendContextMagic = 0x43424843;    // "CHBC"
constexpr uint32_t kStoreContextMagic = 0x43534843;      // "CHSC"
constexpr uint32_t kCommHookContextMagic = 0x43484843;   // "CHHC"
constexpr uint32_t kOpContextMagic = 0x434f4843;         // "CHOC"
constexpr uint32_t kSplitRequestMagic = 0x52534843;      // "CHSR"

// Every type whose layout both sides of the boundary must agree on, in the order of
// BuildFingerprint::layouts. Frozen within an ABI major; a minor version may append.
enum class BoundaryType : uint8_t {
  Pointer,       // void*
  String,        // std::string (8 bytes with _GLIBCXX_USE_CXX11_ABI=0, 32 with =1)
  Vector,        // std::vector<int>
  SharedPtr,     // std::shared_ptr<void>
  UniquePtr,     // std::unique_ptr<int>
  Function,      // std::function<void()> (Future::then, callbacks)
  ExceptionPtr,  // std::exception_ptr (Work::exception, Future::setError)
  Milliseconds,  // std::chrono::milliseconds (timeouts)
  PluginDescriptor,
  BackendContext,
  StoreContext,
  CommHookContext,
  OpContext,
  OptionSpec,
  OptionValues,
  Capabilities,
  Tensor,
  Device,
  ReduceOp,
  AlltoallSingleOptions,
  Error,
  ErrorContext,
  Future,
  GradBucket,
  Backend,        // the base class: since ABI 3 an interface (a vtable pointer and nothing else)
  WorkQueue,      // the SDK queue: plugins allocate it, and its inline submit() reads its members
  SplitRequest,   // what Backend::prepareSplit reads (backend.h)
  CompletedWork,  // plugins allocate it (make_shared), libcommhost constructs it
  AsyncWork,      // plugins derive their works from it: its members sit before theirs
  TunerContext,   // since 3.1 (sdk/tuner.h)
  TuneQuery,      // since 3.1
  TuneCandidate,  // since 3.1: a tuner reorders a vector of them, in place
};
constexpr int kNumBoundaryTypes = 32;
// "std::string", "BackendContext", ...
COMMHOST_API const char* boundaryTypeName(BoundaryType type);
// Types of the standard library (and void*): their layout never changes with a minor
// version of commhost, so any difference means another standard library or flags.
constexpr bool isStandardType(BoundaryType type) { return type <= BoundaryType::Milliseconds; }
// The structs a minor version may append fields to: the host fills the contexts and the
// SplitRequest and a plugin fills its descriptor; each is read only through a reference
// and its `size` prefix. Every other commhost type (OpContext included) is
// embedded by value in inline code on both sides (Work holds its OpContext, vectors of
// Tensor, a thrown Error), so its layout is fixed within an ABI major.
constexpr bool mayGrowInMinor(BoundaryType type) {
  return type == BoundaryType::PluginDescriptor || type == BoundaryType::BackendContext ||
         type == BoundaryType::StoreContext || type == BoundaryType::CommHookContext ||
         type == BoundaryType::SplitRequest || type == BoundaryType::TunerContext || type == BoundaryType::TuneQuery;
}

struct TypeLayout {
  uint32_t size;
  uint32_t align;
};

enum class StdLib : uint8_t { Unknown, LibStdCxx, LibCxx };
enum class CompilerFamily : uint8_t { Unknown, Gcc, Clang };

// Plain data (no pointers, no std types), so the loader can read a plugin's before it
// trusts anything else in it. Each side's values come from its own compiler: plugin.h
// computes kBuildFingerprint in the header, so a plugin's COMMHOST_PLUGIN() records the
// plugin's build and libcommhost records its own.
struct BuildFingerprint {
  uint32_t size;    // sizeof(BuildFingerprint) where it was built: layouts it holds
  StdLib stdlib;    // the C++ standard library's family
  int8_t cxx11Abi;  // libstdc++'s _GLIBCXX_USE_CXX11_ABI (0 or 1); -1 for another library
  CompilerFamily compiler;
  uint8_t reserved;                       // 0
  uint32_t stdlibVersion;                 // _GLIBCXX_RELEASE (e.g. 12) or _LIBCPP_VERSION (e.g. 160000); 0 unknown
  uint32_t compilerMajor;                 // __GNUC__ or __clang_major__; 0 unknown
  TypeLayout layouts[kNumBoundaryTypes];  // indexed by BoundaryType

  // How many layouts this fingerprint holds (a newer minor may have appended types).
  int layoutCount() const {
    constexpr uint32_t first = offsetof(BuildFingerprint, layouts);
    return size > first ? static_cast<int>((size - first) / sizeof(TypeLayout)) : 0;
  }
};

// What the host calls in a plugin's objects through their vtables: a hash of each
// interface's virtual functions, their declarations in order (comments and line breaks do
// not count), made from the headers when commhost is built (cmake/InterfaceHashes.cmake)
// and installed beside them (commhost/sdk/interface_hashes.h). Two builds whose layouts
// agree can still disagree here: a virtual added, removed, moved or retyped shifts every
// vtable slot after it, and the host would call the wrong function. So the virtual
// functions of these interfaces are frozen within an ABI major (a minor version may not
// touch them), and the loader refuses a plugin whose hashes differ (PluginHeader::interfaces). Plain data, read before anything else in the plugin.
// A minor version may append an interface: the loader reads a field only from a plugin
// built for a minor that has it (PluginRegistry: the header of a 3.0 plugin ends at commHook).
struct InterfaceHashes {
  uint64_t backend;   // Backend (sdk/backend.h)
  uint64_t store;     // Store (store.h)
  uint64_t work;      // Work (work.h); AsyncWork adds no virtual function
  uint64_t commHook;  // CommHook (sdk/comm_hook.h)
  uint64_t tuner;     // Tuner (sdk/tuner.h), since 3.1
};
// This build's, computed from the headers it includes (internal linkage: the plugin's copy
// and libcommhost's stay separate values).
constexpr InterfaceHashes kInterfaceHashes = {COMMHOST_INTERFACE_HASH_BACKEND, COMMHOST_INTERFACE_HASH_STORE,
                                              COMMHOST_INTERFACE_HASH_WORK, COMMHOST_INTERFACE_HASH_COMM_HOOK,
                                              COMMHOST_INTERFACE_HASH_TUNER};
// "" when a plugin's interfaces are the host's; else each that differs, with both hashes
// ("Backend (plugin 0x..., commhost 0x...)").
COMMHOST_API std::string interfaceDifferences(const InterfaceHashes& plugin, const InterfaceHashes& host);

// "libstdc++ 12 (_GLIBCXX_USE_CXX11_ABI=1), gcc 12": the toolchain part, for messages.
COMMHOST_API std::string describeToolchain(const BuildFingerprint& fp);
// The toolchain plus every type's size and alignment ("std::string 32/8, ...").
COMMHOST_API std::string describe(const BuildFingerprint& fp);
// "" when a plugin built as `plugin` (for ABI minor `pluginMinor`) can be run by a host
// built as `host`; else each difference that matters ("std::string: 8 bytes in the
// plugin, 32 in commhost"). Refused: another standard library, another libstdc++ dual
// ABI, another size or alignment of any standard type, and of any commhost struct
// (which may only be smaller in a plugin built for an older minor). Not refused: the
// compiler and the library's version (see abi.cc).
COMMHOST_API std::string abiDifferences(const BuildFingerprint& plugin, const BuildFingerprint& host,
                                        uint32_t pluginMinor);

}  // namespace commhost
