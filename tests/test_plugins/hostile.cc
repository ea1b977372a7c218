// SPDX-License-Identifier: Apache-2.0
// Valid ELF plugins whose header hands the loader pointers to nothing: built as
// badpointer (the descriptor pointer) and badname (the descriptor's name). The loader
// must report them unavailable, not read through the pointers (it crashed with SIGSEGV).
#include "commhost/sdk/plugin.h"

namespace {
// An address no mapping holds: the first page of the address space.
constexpr uintptr_t kNowhere = 0x10;

#ifdef HOSTILE_BAD_NAME
commhost::PluginDescriptor makeDescriptor() {
  commhost::PluginDescriptor d;
  d.kind = commhost::PluginKind::Backend;
  d.name = reinterpret_cast<const char*>(kNowhere);
  return d;
}
const commhost::PluginDescriptor kDescriptor = makeDescriptor();
#endif
}  // namespace

#ifdef HOSTILE_BAD_NAME
COMMHOST_PLUGIN(kDescriptor)
#else
extern "C" __attribute__((visibility("default")))
const commhost::PluginHeader commhost_plugin_header = {commhost::kPluginMagic,
                                                       COMMHOST_ABI_MAJOR,
                                                       COMMHOST_ABI_MINOR,
                                                       sizeof(commhost::PluginDescriptor),
                                                       reinterpret_cast<const commhost::PluginDescriptor*>(kNowhere),
                                                       commhost::kBuildFingerprint,
                                                       commhost::kInterfaceHashes};
#endif
