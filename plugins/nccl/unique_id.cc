// SPDX-License-Identifier: Apache-2.0
#include "unique_id.h"

#include <cstring>

#include "nccl_types.h"

namespace commhost::nccl_backend {

IdSource ncclIdSource(const ErrorContext& where) {
  return [where] {
    ncclUniqueId id;
    const ncclResult_t r = ncclGetUniqueId(&id);
    if (r != ncclSuccess)
      raise(ErrorCode::Backend, where, "ncclGetUniqueId failed: " + describeNccl(r, nullptr), hintFor(r));
    return id;
  };
}

std::string uniqueIdKey(int ordinal) { return "nccl_uid/" + std::to_string(ordinal); }

ncclUniqueId exchangeUniqueId(Store& store, int rank, const std::string& key, std::chrono::milliseconds timeout,
                              const IdSource& source, const ErrorContext& where) {
  ncclUniqueId id;
  if (rank == 0) {
    id = source();
    Bytes value(sizeof(id.internal));
    std::memcpy(value.data(), id.internal, sizeof(id.internal));
    store.set(key, value);
    return id;
  }
  ErrorContext at = where;
  at.key = key;
  try {
    store.wait({key}, timeout);
  } catch (const TimeoutError&) {
    raise(ErrorCode::Timeout, at,
          "rank 0 did not publish the NCCL unique id of this communicator within " + std::to_string(timeout.count()) +
              " ms",
          "rank 0 creates it on its first op on a device it has no communicator for yet (or at group creation with "
          "eager_init): check rank 0 "
          "is alive and issues the same ops, or raise init_timeout");
  }
  const Bytes value = store.get(key);
  if (value.size() != sizeof(id.internal))
    raise(ErrorCode::Backend, at,
          "the NCCL unique id in the store has " + std::to_string(value.size()) + " bytes, not " +
              std::to_string(sizeof(id.internal)),
          "every rank must run the same NCCL build; another job may share this store prefix");
  std::memcpy(id.internal, value.data(), sizeof(id.internal));
  return id;
}

}  // namespace commhost::nccl_backend
