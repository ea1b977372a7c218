// SPDX-License-Identifier: Apache-2.0
// abi30: a backend laid out as a plugin built for ABI 3.0 is: its descriptor ends before
// 3.1's createTuner, its build fingerprint records the 29 boundary types 3.0 had, and its
// interface hashes (four: 3.0 had no Tuner) follow that shorter fingerprint. A 3.1 host
// must load it: a minor may only append, and an older plugin keeps working.
#include <cstddef>

#include "../../plugins/self/self_backend.h"

namespace {

using namespace commhost;

constexpr int kTypes30 = 29;  // BoundaryType up to AsyncWork

struct Fingerprint30 {
  uint32_t size;
  StdLib stdlib;
  int8_t cxx11Abi;
  CompilerFamily compiler;
  uint8_t reserved;
  uint32_t stdlibVersion;
  uint32_t compilerMajor;
  TypeLayout layouts[kTypes30];
};

struct Header30 {
  uint32_t magic;
  uint16_t abiMajor, abiMinor;
  uint32_t descriptorSize;
  const PluginDescriptor* descriptor;
  Fingerprint30 build;
  uint64_t interfaces[4];  // backend, store, work, commHook
};

constexpr uint32_t kDescriptorSize30 = offsetof(PluginDescriptor, createTuner);

const PluginDescriptor kDescriptor = {
    kDescriptorSize30,
    kPluginDescriptorMagic,
    uint32_t{COMMHOST_ABI_MAJOR} << 16,
    PluginKind::Backend,
    "abi30",
    "1.0",
    "Test backend laid out as ABI 3.0 built it",
    {},
    self::kCapabilities,
    nullptr,
    self::create,
};

constexpr Fingerprint30 fingerprint30() {
  Fingerprint30 f{};
  f.size = sizeof(Fingerprint30);
  f.stdlib = kBuildFingerprint.stdlib;
  f.cxx11Abi = kBuildFingerprint.cxx11Abi;
  f.compiler = kBuildFingerprint.compiler;
  f.stdlibVersion = kBuildFingerprint.stdlibVersion;
  f.compilerMajor = kBuildFingerprint.compilerMajor;
  for (int i = 0; i < kTypes30; ++i) f.layouts[i] = kBuildFingerprint.layouts[i];
  f.layouts[static_cast<int>(BoundaryType::PluginDescriptor)].size = kDescriptorSize30;
  return f;
}

}  // namespace

extern "C" __attribute__((visibility("default"))) const Header30 commhost_plugin_header = {
    kPluginMagic,
    COMMHOST_ABI_MAJOR,
    0,
    kDescriptorSize30,
    &kDescriptor,
    fingerprint30(),
    {kInterfaceHashes.backend, kInterfaceHashes.store, kInterfaceHashes.work, kInterfaceHashes.commHook}};
