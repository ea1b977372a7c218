// SPDX-License-Identifier: Apache-2.0
// The plugin ABI: what a backend, store, comm-hook or tuner plugin exports.
//
// A plugin is a shared object that declares one PluginDescriptor and exports it with
// COMMHOST_PLUGIN(descriptor) in exactly one source file. The loader opens it with
// Boost.DLL, reads the exported PluginHeader, refuses a different ABI major or a newer
// minor (and a missing or malformed header) with the file path and reason, then
// compares the plugin's build fingerprint with its own (abi.h): std::string,
// std::vector, std::function and the structs below cross the boundary by value, so a
// plugin built against another standard library, another _GLIBCXX_USE_CXX11_ABI or
// other layouts is refused with both fingerprints in the message rather than loaded
// to corrupt memory. Then it checks the descriptor's prefix and reads the descriptor.
// Build plugins with the toolchain and flags commhost was built with.
//
// Ownership: objects a factory returns are owned by the host and destroyed before the
// plugin's shared object is unloaded. Factories run on the thread that creates the
// group; they throw commhost::Error (usually PluginError or ConfigError) to refuse.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "commhost/errors.h"
#include "commhost/future.h"
#include "commhost/logging.h"
#include "commhost/sdk/abi.h"
#include "commhost/sdk/backend.h"
#include "commhost/sdk/capabilities.h"
#include "commhost/sdk/comm_hook.h"
#include "commhost/sdk/launch_report.h"
#include "commhost/sdk/option_schema.h"
#include "commhost/sdk/tuner.h"
#include "commhost/sdk/work_queue.h"
#include "commhost/store.h"
#include "commhost/version.h"

namespace commhost {

enum class PluginKind : uint8_t { Backend, Store, CommHook, Tuner /* since 3.1 */ };
COMMHOST_API const char* pluginKindName(PluginKind kind);

// The structs below are frozen within ABI major 3: a minor version may append fields at
// the end of the descriptor and the factory contexts (never move, remove or retype
// one); OpContext is held by value in inline code (Work) and may not grow within a major. Each begins with the prefix abi.h explains
// (size, magic, abiVersion), filled by default member initializers: a host that builds a
// context, or a plugin that declares a descriptor, has nothing to fill by hand but
// COMMHOST_DESCRIPTOR_PREFIX at the start of a descriptor's initializer list.

// What a backend factory gets: where it sits in its group. Filled by the host; valid
// during the factory call only (copy what the backend keeps).
struct BackendContext {
  uint32_t size = sizeof(BackendContext);
  uint32_t magic = kBackendContextMagic;
  uint32_t abiVersion = kAbiVersion;
  std::string groupName;    // the group's name ("main", "main/sub1", ...)
  std::string backendName;  // the key under `backends:` in the config
  int rank = 0;             // this rank in the group, in [0, worldSize)
  int worldSize = 1;        // ranks in the group
  // Private to this backend in this group (a PrefixStore). Built by a hot swap, the keys the
  // factory writes (its rendezvous) are deleted once every rank has finished that swap
  // attempt: a peer must read them during its own factory call, not later; keys written
  // after the factory returns (at a first op, a split) stay the backend's to manage.
  StorePtr store;
  std::chrono::milliseconds timeout{0};  // the group's default op timeout (group.timeout), > 0
  std::shared_ptr<Logger> logger;        // tagged with the plugin, group and rank
  // Composite backends (e.g. hier): creates the backend configured under `backends:` as
  // `name`, for the ranks `members` of this group (sorted, unique, this rank among them),
  // as the group "<groupName>/<label>" (its rank there: this rank's index in `members`)
  // with a store of its own below this backend's. Every member calls it with the same
  // name, members and label, and `label` (no '/') differs for each member set the caller
  // creates ("intra0", "intra1", "inter"). Throws ConfigError when `name` is not
  // configured, names this backend, nests too deep or its plugin is unusable, and
  // PluginError when its factory fails. The caller owns what it returns (the deleter keeps
  // the plugin loaded) and forwards abort() and shutdown() to it. Valid during the factory
  // call only. A backend that calls it is rebuilt, never kept, by a hot swap.
  std::function<std::shared_ptr<Backend>(const std::string& name, const std::vector<int>& members,
                                         const std::string& label)>
      makeBackend;
  // Subgroups only: what the parent group's backend of the same name returned from
  // prepareSplit() on this rank for this subgroup (the same plugin made it, so the factory
  // knows its type); null for any other creation (a group of its own, a hot swap's
  // rebuild, a makeBackend part) and when the parent's backend prepared nothing. The
  // factory keeps what it needs; the host drops its references once the subgroup exists.
  std::shared_ptr<void> splitFrom;
  // Reports to the launcher (commhost/sdk/launch_report.h), e.g. a peer this rank
  // cannot reach while the backend is built; null when no launcher listens.
  LaunchReportFn reportLaunch;
};

// What a store factory gets: the job's rendezvous facts. Filled by the host (or a tool
// such as `commhost store serve`); valid during the factory call only.
struct StoreContext {
  uint32_t size = sizeof(StoreContext);
  uint32_t magic = kStoreContextMagic;
  uint32_t abiVersion = kAbiVersion;
  int rank = 0;                          // this process's global rank
  int worldSize = 1;                     // processes in the job
  std::string masterAddr;                // from MASTER_ADDR (or the launcher); may be empty
  int masterPort = 0;                    // from MASTER_PORT; 0 if unset
  std::chrono::milliseconds timeout{0};  // how long store calls may wait (group.timeout)
  std::shared_ptr<Logger> logger;        // tagged with the plugin and rank
  // Reports to the launcher (commhost/sdk/launch_report.h): a store that waits for its
  // server reports StoreWaiting / StoreReached / StoreGaveUp. Null when no launcher listens.
  LaunchReportFn reportLaunch;
};

// What a comm-hook factory gets. Filled by the host; valid during the factory call only.
struct CommHookContext {
  uint32_t size = sizeof(CommHookContext);
  uint32_t magic = kCommHookContextMagic;
  uint32_t abiVersion = kAbiVersion;
  int rank = 0;                    // this process's rank in the group the hook serves
  int worldSize = 1;               // ranks in that group
  std::shared_ptr<Logger> logger;  // tagged with the plugin and rank
  // Wrappers only (a plugin whose descriptor sets wrapName, named by a config's `wrap:`):
  // the hook to wrap, already created; null when the plugin is used as a hook of its own.
  std::shared_ptr<CommHook> inner;
};

// What a plugin exports, through COMMHOST_PLUGIN(). Declared by the plugin with static
// storage; the host reads it after the PluginHeader checks pass and never writes it.
struct PluginDescriptor {
  uint32_t size = sizeof(PluginDescriptor);  // where the plugin was built (abi.h)
  uint32_t magic = kPluginDescriptorMagic;
  uint32_t abiVersion = kAbiVersion;      // the ABI the plugin was built for
  PluginKind kind = PluginKind::Backend;  // which one factory below is set
  const char* name = nullptr;             // unique among loaded plugins; what configs refer to
  const char* version = nullptr;          // the plugin's own version, free form
  const char* description = nullptr;      // one line, for `commhost plugins list/inspect`
  // Every option a config may set for this plugin; the host validates a config against
  // them (unknown keys, types, ranges) and hands the factory all of them, defaults filled.
  std::vector<OptionSpec> options;
  // Backends only: the manifest the dispatcher validates routes against.
  Capabilities capabilities;
  // Optional: returns "" when the plugin can run here, else why not (e.g. "no CUDA
  // device"). An unavailable plugin is listed with this reason; using it is an error.
  std::string (*probe)() = nullptr;
  // Exactly the one factory matching `kind` is set.
  std::unique_ptr<Backend> (*createBackend)(const OptionValues&, const BackendContext&) = nullptr;
  std::shared_ptr<Store> (*createStore)(const OptionValues&, const StoreContext&) = nullptr;
  std::unique_ptr<CommHook> (*createCommHook)(const OptionValues&, const CommHookContext&) = nullptr;
  // Comm hooks only: the name a config's `wrap:` calls this plugin by ("fp16"), when it can
  // wrap another hook (CommHookContext::inner); null when it cannot.
  const char* wrapName = nullptr;
  // Optional: checks a configured instance's options (all of them, defaults
  // filled, already valid against `options`) for what their specs cannot say, on the host
  // that loads the config: every rank at init, `config check`, and `commhost run` before
  // it starts any rank. Returns "" when they can work here, else what is wrong and what to
  // do (e.g. gloo: a device that is neither an interface nor an address of this host).
  // Must not block for long or touch the job. The host reads it through hasOptionCheck,
  // which also checks `size` covers it (every 3.x descriptor does).
  std::string (*checkOptions)(const OptionValues& options) = nullptr;
  // Since 3.1: the factory of a tuner plugin (kind Tuner; commhost/sdk/tuner.h). The host
  // reads it through hasTunerFactory, which checks `size` covers it.
  std::unique_ptr<Tuner> (*createTuner)(const OptionValues&, const TunerContext&) = nullptr;
};

// Whether `d` (of any minor) has a checkOptions the host may call.
inline bool hasOptionCheck(const PluginDescriptor& d) {
  const auto end = static_cast<size_t>(reinterpret_cast<const char*>(&d.checkOptions + 1) -
                                       reinterpret_cast<const char*>(&d));
  return d.size >= end && d.checkOptions != nullptr;
}

// Whether `d` (of any minor) has a createTuner the host may call.
inline bool hasTunerFactory(const PluginDescriptor& d) {
  const auto end = static_cast<size_t>(reinterpret_cast<const char*>(&d.createTuner + 1) -
                                       reinterpret_cast<const char*>(&d));
  return d.size >= end && d.createTuner != nullptr;
}

// The start of a descriptor's initializer list, before its kind:
//   const PluginDescriptor kDescriptor = {COMMHOST_DESCRIPTOR_PREFIX, PluginKind::Backend, "name", ...};
#define COMMHOST_DESCRIPTOR_PREFIX \
  sizeof(::commhost::PluginDescriptor), ::commhost::kPluginDescriptorMagic, ::commhost::kAbiVersion

// The exported symbol: plain data, so the loader can check it before trusting anything
// else. magic, abiMajor and abiMinor keep the offsets they had in ABI 1, so any host can
// tell a plugin of another major and refuse it without reading further.
struct PluginHeader {
  uint32_t magic;                      // kPluginMagic
  uint16_t abiMajor;                   // COMMHOST_ABI_MAJOR where the plugin was built
  uint16_t abiMinor;                   // COMMHOST_ABI_MINOR where the plugin was built
  uint32_t descriptorSize;             // sizeof(PluginDescriptor) where the plugin was built (= descriptor->size)
  const PluginDescriptor* descriptor;  // the plugin's descriptor, read only after the checks pass
  BuildFingerprint build;              // the plugin's toolchain and layouts (kBuildFingerprint)
  InterfaceHashes interfaces;          // its interfaces' virtual functions (kInterfaceHashes), since ABI 3
};
// The loader finds `interfaces` after the plugin's own fingerprint (whose size a minor may
// grow), at the next 8-byte boundary: nothing may sit between the two.
static_assert(offsetof(PluginHeader, interfaces) ==
                  (offsetof(PluginHeader, build) + sizeof(BuildFingerprint) + alignof(InterfaceHashes) - 1) /
                      alignof(InterfaceHashes) * alignof(InterfaceHashes),
              "PluginHeader::interfaces follows build directly");
constexpr uint32_t kPluginMagic = 0x434f4d48;  // "COMH"
constexpr const char* kPluginSymbol = "commhost_plugin_header";

namespace abi_detail {
template <class T> constexpr TypeLayout layoutOf() {
  return {static_cast<uint32_t>(sizeof(T)), static_cast<uint32_t>(alignof(T))};
}
}  // namespace abi_detail

// This build's fingerprint, computed by whichever compiler reads this header. A
// namespace-scope constexpr has internal linkage: the plugin's copy and libcommhost's
// are separate values, never merged by the dynamic linker.
constexpr BuildFingerprint kBuildFingerprint = {
    sizeof(BuildFingerprint),
#if defined(_LIBCPP_VERSION)
    StdLib::LibCxx,
    -1,
#elif defined(__GLIBCXX__)
    StdLib::LibStdCxx,
    _GLIBCXX_USE_CXX11_ABI,
#else
    StdLib::Unknown,
    -1,
#endif
#if defined(__clang__)
    CompilerFamily::Clang,
#elif defined(__GNUC__)
    CompilerFamily::Gcc,
#else
    CompilerFamily::Unknown,
#endif
    0,
#if defined(_LIBCPP_VERSION)
    _LIBCPP_VERSION,
#elif defined(_GLIBCXX_RELEASE)
    _GLIBCXX_RELEASE,
#else
    0,
#endif
#if defined(__clang__)
    __clang_major__,
#elif defined(__GNUC__)
    __GNUC__,
#else
    0,
#endif
    {
        abi_detail::layoutOf<void*>(),
        abi_detail::layoutOf<std::string>(),
        abi_detail::layoutOf<std::vector<int>>(),
        abi_detail::layoutOf<std::shared_ptr<void>>(),
        abi_detail::layoutOf<std::unique_ptr<int>>(),
        abi_detail::layoutOf<std::function<void()>>(),
        abi_detail::layoutOf<std::exception_ptr>(),
        abi_detail::layoutOf<std::chrono::milliseconds>(),
        abi_detail::layoutOf<PluginDescriptor>(),
        abi_detail::layoutOf<BackendContext>(),
        abi_detail::layoutOf<StoreContext>(),
        abi_detail::layoutOf<CommHookContext>(),
        abi_detail::layoutOf<OpContext>(),
        abi_detail::layoutOf<OptionSpec>(),
        abi_detail::layoutOf<OptionValues>(),
        abi_detail::layoutOf<Capabilities>(),
        abi_detail::layoutOf<Tensor>(),
        abi_detail::layoutOf<Device>(),
        abi_detail::layoutOf<ReduceOp>(),
        abi_detail::layoutOf<AlltoallSingleOptions>(),
        abi_detail::layoutOf<Error>(),
        abi_detail::layoutOf<ErrorContext>(),
        abi_detail::layoutOf<Future>(),
        abi_detail::layoutOf<GradBucket>(),
        abi_detail::layoutOf<Backend>(),
        abi_detail::layoutOf<WorkQueue>(),
        abi_detail::layoutOf<SplitRequest>(),
        abi_detail::layoutOf<CompletedWork>(),
        abi_detail::layoutOf<AsyncWork>(),
        abi_detail::layoutOf<TunerContext>(),
        abi_detail::layoutOf<TuneQuery>(),
        abi_detail::layoutOf<TuneCandidate>(),
    },
};
static_assert(sizeof(kBuildFingerprint.layouts) / sizeof(TypeLayout) == kNumBoundaryTypes,
              "one layout per BoundaryType, in its order");

}  // namespace commhost

// Exports `descriptor` (a PluginDescriptor with static storage) as this plugin's entry point.
#define COMMHOST_PLUGIN(descriptor)                                                              \
  extern "C" __attribute__((visibility("default")))                                              \
  const ::commhost::PluginHeader commhost_plugin_header = {::commhost::kPluginMagic,             \
                                                           COMMHOST_ABI_MAJOR,                   \
                                                           COMMHOST_ABI_MINOR,                   \
                                                           sizeof(::commhost::PluginDescriptor), \
                                                           &(descriptor),                        \
                                                           ::commhost::kBuildFingerprint,        \
                                                           ::commhost::kInterfaceHashes};
