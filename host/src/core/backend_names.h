// SPDX-License-Identifier: Apache-2.0
// The config name of each backend object the host created, kept by the host beside the
// object rather than in it: Backend is an interface without data members (sdk/backend.h),
// so a plugin's objects never depend on how libcommhost stores this. Read only on a cold
// path (the NotSupported message of an op a partial backend does not override).
// Thread-safe: backends are created and destroyed on any group's thread.
#pragma once

#include <string>

namespace commhost {
class Backend;

namespace backend_names {
// Records `name` for `backend` until forget() (the host's deleter calls it).
void remember(const Backend* backend, const std::string& name);
void forget(const Backend* backend);
// The name remembered for `backend`; "" for one the host did not create.
std::string of(const Backend* backend);
}  // namespace backend_names

}  // namespace commhost
