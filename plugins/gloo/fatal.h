// SPDX-License-Identifier: Apache-2.0
// The last word before Gloo aborts the process. Gloo checks what arrives on its own
// transport thread (GLOO_ENFORCE in pair.cc, e.g. a message longer than the buffer
// posted for it when ranks pass tensors of different sizes) and throws there, where no
// one can catch it: std::terminate follows. A terminate handler, installed once when
// the first gloo backend is created, logs which groups and ops were in flight, that
// ranks likely passed different sizes, and how to find out (debug.check_collectives),
// then hands over to the previous handler, which aborts as before.
//
// Threading: register/unregister from any thread; the handler only try-locks, so a
// terminate while the registry is locked still gets its line out (without ops).
#pragma once

#include <string>

namespace commhost::gloo_backend {

class GlooBackend;

void installFatalHint();
void registerForFatalHint(const GlooBackend* backend);
void unregisterForFatalHint(const GlooBackend* backend);
// The text the handler writes for `what` (the exception's message, "" if none) and
// the backends' in-flight lines; separate so it can be tested without aborting.
std::string fatalHint(const std::string& what, const std::string& inFlight);

}  // namespace commhost::gloo_backend
