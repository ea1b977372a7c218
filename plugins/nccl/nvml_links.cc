// SPDX-License-Identifier: Apache-2.0
#include "nvml_links.h"

#include <dlfcn.h>

#include <cstdio>
#include <mutex>

namespace commhost::nccl_backend {

namespace {

// The few NVML declarations used, as nvml.h has them (the CUDA toolkit does not ship the
// header; the ABI of these calls and nvmlPciInfo_t has been stable since NVML 10).
using nvmlReturn_t = int;
using nvmlDevice_t = struct nvmlDevice_st*;
constexpr nvmlReturn_t kNvmlSuccess = 0;
constexpr int kNvmlFeatureEnabled = 1;
constexpr int kNvmlLinkGpu = 0x00;
constexpr int kNvmlLinkSwitch = 0x02;
struct NvmlPciInfo {
  char busIdLegacy[16];
  unsigned domain, bus, device, pciDeviceId, pciSubSystemId;
  char busId[32];
};
// More than any GPU has (NVML_NVLINK_MAX_LINKS is 18 on Hopper); the loop ends at the
// first link index NVML refuses.
constexpr unsigned kMaxLinks = 32;

struct Nvml {
  nvmlReturn_t (*init)() = nullptr;
  nvmlReturn_t (*shutdown)() = nullptr;
  const char* (*errorString)(nvmlReturn_t) = nullptr;
  nvmlReturn_t (*handleByBusId)(const char*, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*linkState)(nvmlDevice_t, unsigned, int*) = nullptr;
  nvmlReturn_t (*remoteType)(nvmlDevice_t, unsigned, int*) = nullptr;  // absent before driver 460
  nvmlReturn_t (*remotePci)(nvmlDevice_t, unsigned, NvmlPciInfo*) = nullptr;
  std::string missing;  // why NVML is unusable, "" when loaded
};

template <class F> bool bind(void* lib, const char* name, F* out) {
  *out = reinterpret_cast<F>(dlsym(lib, name));
  return *out != nullptr;
}

// Loaded once per process and never unloaded (other users of NVML may share it).
const Nvml& nvml() {
  static Nvml n;
  static std::once_flag once;
  std::call_once(once, [] {
    void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      const char* e = dlerror();
      n.missing = std::string("libnvidia-ml.so.1 not loadable: ") + (e ? e : "unknown error");
      return;
    }
    bind(lib, "nvmlDeviceGetNvLinkRemoteDeviceType", &n.remoteType);
    bind(lib, "nvmlErrorString", &n.errorString);
    if (!bind(lib, "nvmlInit_v2", &n.init) || !bind(lib, "nvmlShutdown", &n.shutdown) ||
        !bind(lib, "nvmlDeviceGetHandleByPciBusId_v2", &n.handleByBusId) ||
        !bind(lib, "nvmlDeviceGetNvLinkState", &n.linkState) ||
        !bind(lib, "nvmlDeviceGetNvLinkRemotePciInfo_v2", &n.remotePci))
      n.missing = "libnvidia-ml.so.1 lacks the NVLink queries (driver too old)";
  });
  return n;
}

// NVML's own spelling (NVML_DEVICE_PCI_BUS_ID_FMT: eight-digit domain, upper case).
std::string nvmlBusId(const std::string& busId) {
  unsigned domain = 0, bus = 0, device = 0, function = 0;
  if (std::sscanf(busId.c_str(), "%x:%x:%x.%x", &domain, &bus, &device, &function) != 4) return busId;
  char out[32];
  std::snprintf(out, sizeof(out), "%08X:%02X:%02X.%X", domain, bus, device, function);
  return out;
}

std::string failed(const Nvml& n, const char* call, nvmlReturn_t r) {
  return std::string(call) + " failed: " + (n.errorString ? n.errorString(r) : std::to_string(r));
}

}  // namespace

std::optional<std::vector<NvLinkEnd>> readNvLinks(const std::string& busId, std::string* why) {
  const Nvml& n = nvml();
  if (!n.missing.empty()) {
    *why = n.missing;
    return std::nullopt;
  }
  if (const nvmlReturn_t r = n.init(); r != kNvmlSuccess) {
    *why = failed(n, "nvmlInit_v2", r);
    return std::nullopt;
  }
  std::optional<std::vector<NvLinkEnd>> out;
  nvmlDevice_t device = nullptr;
  if (const nvmlReturn_t r = n.handleByBusId(nvmlBusId(busId).c_str(), &device); r != kNvmlSuccess) {
    *why = failed(n, "nvmlDeviceGetHandleByPciBusId_v2", r) + " (" + busId + ")";
  } else {
    out.emplace();
    for (unsigned link = 0; link < kMaxLinks; ++link) {
      int active = 0;
      // Past the last link (or on a GPU without NVLink) NVML refuses the index.
      if (n.linkState(device, link, &active) != kNvmlSuccess) break;
      if (active != kNvmlFeatureEnabled) continue;
      int type = kNvmlLinkGpu;
      if (n.remoteType && n.remoteType(device, link, &type) != kNvmlSuccess) continue;
      NvLinkEnd end;
      if (type == kNvmlLinkSwitch) {
        end.kind = NvLinkEnd::Kind::Switch;
      } else if (type == kNvmlLinkGpu) {
        NvmlPciInfo pci{};
        if (n.remotePci(device, link, &pci) != kNvmlSuccess) continue;
        pci.busId[sizeof(pci.busId) - 1] = 0;
        end.kind = NvLinkEnd::Kind::Gpu;
        end.busId = normalizeBusId(pci.busId);
      }
      out->push_back(end);
    }
  }
  n.shutdown();
  return out;
}

}  // namespace commhost::nccl_backend
