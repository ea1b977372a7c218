// The plugin ABI: what a backend, store or comm-hook plugin exports.
//
// A plugin is a shared object that declares one PluginDescriptor and exports it with
// COMMHOST_PLUGIN(descriptor) in exactly one source file. The loader opens it with
// Boost.DLL, reads the exported PluginHeader, refuses a different ABI major or a newer
// minor (and a missing or malformed header) with the file path and reason, then reads
// the descriptor. Plugins and host must share the C++ standard library ABI (the same
// libstdc++ and _GLIBCXX_USE_CXX11_ABI): std::string, std::vector and std::function
// cross the boundary. Build plugins with the toolchain commhost was built with.
//
// Ownership: objects a factory returns are owned by the host and destroyed before the
// plugin's shared object is unloaded. Factories run on the thread that creates the
// group; they throw commhost::Error (usually PluginError or ConfigError) to refuse.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "commhost/backend.h"
#include "commhost/capabilities.h"
#include "commhost/comm_hook.h"
#include "commhost/logging.h"
#include "commhost/option_schema.h"
#include "commhost/store.h"
#include "commhost/version.h"

namespace commhost {

enum class PluginKind : uint8_t { Backend, Store, CommHook };
COMMHOST_API const char* pluginKindName(PluginKind kind);

// What a backend factory gets: where it sits in its group.
struct BackendContext {
  std::string groupName;
  std::string backendName;  // the key under `backends:` in the config
  int rank = 0;
  int worldSize = 1;
  StorePtr store;           // private to this backend in this group (a PrefixStore)
  std::chrono::milliseconds timeout{0};  // the group's default op timeout
  std::shared_ptr<Logger> logger;
};

// What a store factory gets: the job's rendezvous facts.
struct StoreContext {
  int rank = 0;
  int worldSize = 1;
  std::string masterAddr;   // from MASTER_ADDR (or the launcher); may be empty
  int masterPort = 0;       // from MASTER_PORT; 0 if unset
  std::chrono::milliseconds timeout{0};
  std::shared_ptr<Logger> logger;
};

struct CommHookContext {
  int rank = 0;
  int worldSize = 1;
  std::shared_ptr<Logger> logger;
};

struct PluginDescriptor {
  PluginKind kind;
  const char* name;          // unique among loaded plugins; what configs refer to
  const char* version;       // the plugin's own version, free form
  const char* description;   // one line
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
};

// The exported symbol: plain data, so the loader can check it before trusting anything else.
struct PluginHeader {
  uint32_t magic;           // kPluginMagic
  uint16_t abiMajor;
  uint16_t abiMinor;
  uint32_t descriptorSize;  // sizeof(PluginDescriptor) where the plugin was built
  const PluginDescriptor* descriptor;
};
constexpr uint32_t kPluginMagic = 0x434f4d48;  // "COMH"
constexpr const char* kPluginSymbol = "commhost_plugin_header";

}  // namespace commhost

// Exports `descriptor` (a PluginDescriptor with static storage) as this plugin's entry point.
#define COMMHOST_PLUGIN(descriptor)                                                      \
  extern "C" __attribute__((visibility("default"))) const ::commhost::PluginHeader       \
      commhost_plugin_header = {::commhost::kPluginMagic, COMMHOST_ABI_MAJOR,            \
                                COMMHOST_ABI_MINOR, sizeof(::commhost::PluginDescriptor), &(descriptor)};
