// SPDX-License-Identifier: Apache-2.0
// Helpers for backend plugins (in libcommhost, not part of the ABI's structs): what more
// than one backend needs while it joins its group.
#pragma once

#include <string>
#include <vector>

#include "commhost/export.h"
#include "commhost/plugin.h"

namespace commhost {

// "<hostname> boot <boot_id>": equal for every process of one booted host, different
// across hosts (and across UTS namespaces, which is how the multi-host tests make hosts).
COMMHOST_API std::string hostIdentity();

// Every rank of ctx's group publishes `mine` under "<key>/<rank>" of the backend's store
// and gets every rank's value, in rank order. Waits up to ctx.timeout; a TimeoutError
// names the ranks that never published (`what` says what the exchange was for).
COMMHOST_API std::vector<std::string> exchangeAll(const BackendContext& ctx, const std::string& key,
                                                  const std::string& mine, const char* what);

}  // namespace commhost
