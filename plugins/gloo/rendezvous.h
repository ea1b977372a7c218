// SPDX-License-Identifier: Apache-2.0
// Connecting Gloo: the adapter from commhost's Store to gloo::rendezvous::Store, the
// transport device, and the full-mesh contexts a backend uses in rotation.
#pragma once

#include <gloo/context.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/device.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "abortable.h"
#include "commhost/sdk/plugin.h"

namespace commhost::gloo_backend {

// Gloo's rendezvous keys live under `prefix` in a commhost store.
class StoreAdapter final : public ::gloo::rendezvous::Store {
 public:
  StoreAdapter(StorePtr store, std::string prefix, std::chrono::milliseconds timeout);
  void set(const std::string& key, const std::vector<char>& data) override;
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override;

 private:
  std::string full(const std::string& key) const { return prefix_ + "/" + key; }
  StorePtr store_;
  std::string prefix_;
  std::chrono::milliseconds timeout_;
};

// `device`: an interface name (e.g. eth0), a hostname or an address; "": the address this
// host's name resolves to when that is not loopback, so ranks on several hosts reach each
// other with no option set, else 127.0.0.1 (defaultHostAddress()). A
// name that is not an interface and does not resolve is a ConfigError naming it.
// Gloo's transport thread, which the device starts, is named "gloo transport" (top -H,
// gdb) and runs on `transportCpus` (empty: any CPU); see placement.h.
// A hostname or address as the numeric address it resolves to (Gloo is handed only
// those); ConfigError when it does not resolve.
std::string numericAddress(const std::string& device, const BackendContext& ctx);
// The same without raising: "" with `*problem` set when it does not resolve to an
// address of this host.
std::string resolveAddress(const std::string& device, std::string* problem);
// "" when `device` (the option) can be used on this host: "", an interface, or a name or
// address of this host; else what is wrong and what to do (the descriptor's checkOptions).
std::string deviceProblem(const std::string& device);

std::shared_ptr<::gloo::transport::Device> createDevice(const std::string& device, const BackendContext& ctx,
                                                        const std::vector<int>& transportCpus);

// How many ranks of ctx's group share this process's CPUs, this one included: ranks on
// this host (hostIdentity()) whose affinity is `cpus` too. Ranks a launcher bound to CPUs
// of their own (mpirun --bind-to core) do not compete, so they do not count.
int ranksSharingCpus(const BackendContext& ctx, const std::vector<int>& cpus);

// `count` contexts, each a full mesh over the group, rendezvoused through `store`; the
// buffers their ops make are listed in `registry` (abortable.h).
std::vector<std::shared_ptr<::gloo::Context>> connectContexts(const BackendContext& ctx,
                                                              const std::shared_ptr<::gloo::transport::Device>& device,
                                                              int count, std::chrono::milliseconds timeout,
                                                              const std::shared_ptr<AbortRegistry>& registry);

// Every peer's endpoints of its connections to this rank, exchanged through the store
// once after connecting: Gloo names a lost connection by the peer's address only, and
// this map turns that address into the peer's rank.
std::map<std::string, int> exchangeEndpoints(const BackendContext& ctx,
                                             const std::vector<std::shared_ptr<::gloo::Context>>& contexts,
                                             std::chrono::milliseconds timeout);

}  // namespace commhost::gloo_backend
