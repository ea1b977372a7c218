// SPDX-License-Identifier: Apache-2.0
#include "device_casts.h"

#include <dlfcn.h>

#include <mutex>

#include "commhost/errors.h"
#include "commhost/registry.h"

namespace commhost::hooks {
namespace {

#ifdef COMMHOST_CUDA_CASTS_MODULE
DeviceCasts* open(std::string* why) {
  // Installed beside libcommhost (build tree and install tree alike).
  const std::string path = libcommhostDirectory() + "/" COMMHOST_CUDA_CASTS_MODULE;
  void* module = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!module) {
    const char* error = ::dlerror();
    *why = "cannot load " + path + " (" + (error ? error : "unknown dlopen error") +
           "); it needs the CUDA runtime (libcudart) on the library path";
    return nullptr;
  }
  using Make = DeviceCasts* (*)();
  const auto make = reinterpret_cast<Make>(::dlsym(module, "commhost_cuda_casts"));
  if (!make) {
    *why = path + " has no commhost_cuda_casts; reinstall commhost";
    return nullptr;
  }
  return make();
}
#endif

}  // namespace

DeviceCasts& deviceCasts(const std::string& what) {
#ifndef COMMHOST_CUDA_CASTS_MODULE
  throw NotSupportedError(what +
                          ": this commhost was built without CUDA (COMMHOST_WITH_CUDA=OFF), so it has no "
                          "cast kernels for CUDA tensors; rebuild with -DCOMMHOST_WITH_CUDA=ON, or pass CPU "
                          "tensors");
#else
  static std::once_flag once;
  static DeviceCasts* casts = nullptr;
  static std::string why;
  std::call_once(once, [] { casts = open(&why); });
  if (!casts) throw BackendError(what + ": " + why);
  return *casts;
#endif
}

}  // namespace commhost::hooks
