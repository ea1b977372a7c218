// SPDX-License-Identifier: Apache-2.0
// The unique-id exchange that starts a communicator: rank 0 makes an ncclUniqueId and
// publishes it through the backend's private store; every other rank waits for it.
// Device-independent: unit-tested with ranks as threads over a HashStore.
#pragma once

#include <nccl.h>

#include <chrono>
#include <functional>
#include <string>

#include "commhost/errors.h"
#include "commhost/store.h"

namespace commhost::nccl_backend {

// Where ids come from: ncclGetUniqueId by default. ncclGetUniqueId needs no GPU (it
// picks a bootstrap interface), so the tests use the real one too; the parameter lets a
// test give every rank a known id.
using IdSource = std::function<ncclUniqueId()>;
IdSource ncclIdSource(const ErrorContext& where);

// The store key of the id of the backend's `ordinal`-th communicator made through the
// store (Communicator::Setup::ordinal): never the device index, which differs between
// ranks on one host. The store is the backend's private one, so groups never share a key.
std::string uniqueIdKey(int ordinal);

// Rank 0 calls `source` and sets the id at `key`; other ranks wait up to `timeout` for
// it. A TimeoutError names the key and says rank 0 has not created the communicator of
// this device yet (it never issued an op on it, or is still starting); a value of the
// wrong size is a BackendError.
ncclUniqueId exchangeUniqueId(Store& store, int rank, const std::string& key, std::chrono::milliseconds timeout,
                              const IdSource& source, const ErrorContext& where);

}  // namespace commhost::nccl_backend
