// SPDX-License-Identifier: Apache-2.0
// A backend whose probe starts a thread that lives as long as the process, with the
// signal mask the probe's caller had, as the CUDA driver does behind the nccl plugin's probe
// (cudaGetDeviceCount). `commhost run` probes the plugins it finds while checking the
// config, so its launcher then has such a thread: the launcher tests check that its
// signals (SIGCHLD, SIGINT) still reach the launcher's loop. The thread is named
// "probe-thread" so a test can see it in /proc. Kept in a folder of its own.
#include <pthread.h>
#include <unistd.h>

#include <thread>

#include "commhost/sdk/plugin.h"

namespace {

std::string probe() {
  static const bool started = [] {
    std::thread([] {
      pthread_setname_np(pthread_self(), "probe-thread");
      for (;;) ::pause();  // returns after each signal handled on this thread
    }).detach();
    return true;
  }();
  (void)started;
  return "";
}

std::unique_ptr<commhost::Backend> create(const commhost::OptionValues&, const commhost::BackendContext&) {
  return nullptr;  // never routed to: the tests only need its probe to run
}

const commhost::PluginDescriptor kDescriptor = {
    COMMHOST_DESCRIPTOR_PREFIX,
    commhost::PluginKind::Backend,
    "probe_thread",
    "1.0",
    "Test plugin whose probe leaves a thread running (as the CUDA driver's does)",
    {},
    {commhost::Capabilities::allOps(),
     commhost::Capabilities::allDTypes(),
     commhost::Capabilities::allReduceOps(),
     {commhost::DeviceType::CUDA},
     {}},
    probe,
    create,
};

}  // namespace

COMMHOST_PLUGIN(kDescriptor)
