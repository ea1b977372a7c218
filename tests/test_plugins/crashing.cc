// SPDX-License-Identifier: Apache-2.0
// Plugins whose loading never returns normally, for `commhost plugins list`'s child-process
// probe: built as initabort (a static initializer that aborts: SIGABRT) and inithang (one
// that sleeps far longer than any probe limit). Loaded in-process, either would take the
// command down or hang it.
#include <unistd.h>

#include <cstdlib>

#include "commhost/sdk/plugin.h"

namespace {
#ifdef CRASHING_HANG
const int kHang = [] {
  ::sleep(3600);
  return 0;
}();
#else
const int kAbort = [] {
  std::abort();
  return 0;
}();
#endif
}  // namespace
