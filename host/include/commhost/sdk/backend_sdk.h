// SPDX-License-Identifier: Apache-2.0
// Helpers for backend plugins (in libcommhost, not part of the ABI's structs): what more
// than one backend needs while it joins its group.
#pragma once

#include <string>
#include <vector>

#include "commhost/export.h"
#include "commhost/sdk/plugin.h"

namespace commhost {

// "<hostname> boot <boot_id>": equal for every process of one booted host, different
// across hosts (and across UTS namespaces, which is how the multi-host tests make hosts).
COMMHOST_API std::string hostIdentity();

// The bytes of every tensor in `tensors` together: what an op's size-dependent choice
// (e.g. inline_max) compares for a list of tensors.
inline size_t totalBytes(const std::vector<Tensor>& tensors) {
  size_t bytes = 0;
  for (const auto& t : tensors) bytes += t.nbytes();
  return bytes;
}

// The CPUs the calling thread may run on (its affinity mask, normally the process's),
// ascending; empty if the kernel does not say.
COMMHOST_API std::vector<int> allowedCpus();

// Every rank of ctx's group publishes `mine` under "<key>/<rank>" of the backend's store
// and gets every rank's value, in rank order. Waits up to ctx.timeout; a TimeoutError
// names the ranks that never published (`what` says what the exchange was for). A rank
// that gives up calls publishFailure() instead: the others' exchangeAll then throws
// PluginError "rank R <why>" within 0.1 s, rather than wait for it until the timeout.
COMMHOST_API std::vector<std::string> exchangeAll(const BackendContext& ctx, const std::string& key,
                                                  const std::string& mine, const char* what);
// This rank's part of exchangeAll under `key`, without waiting for the others': for a
// rank that already knows it need not read theirs (their exchangeAll still gets it).
COMMHOST_API void publishForExchange(const BackendContext& ctx, const std::string& key, const std::string& mine);
// Published by a rank that cannot take part in the exchange under `key` (`why`, e.g.
// "could not create its part: ..."); it then throws its own error.
COMMHOST_API void publishFailure(const BackendContext& ctx, const std::string& key, const std::string& why);

}  // namespace commhost
