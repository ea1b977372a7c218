// SPDX-License-Identifier: Apache-2.0
#include "fatal.h"

#include <cstdio>
#include <exception>
#include <mutex>
#include <set>

#include "commhost/mutex.h"
#include "gloo_backend.h"

namespace commhost::gloo_backend {
namespace {

// The gloo backends alive in this process, for the handler's in-flight lines.
struct LiveBackends {
  Mutex mutex;
  std::set<const GlooBackend*> backends GUARDED_BY(mutex);
};
LiveBackends& live() {
  static LiveBackends r;
  return r;
}
std::terminate_handler previousHandler = nullptr;

void onTerminate() {
  std::string what;
  if (auto error = std::current_exception()) {
    try {
      std::rethrow_exception(error);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
  }
  std::string inFlight;
  if (LiveBackends& r = live(); r.mutex.tryLock()) {
    for (const auto* backend : r.backends) inFlight += "  " + backend->inFlight() + "\n";
    r.mutex.unlock();
  }
  if (!inFlight.empty()) {  // only processes that run a gloo backend get the hint
    const std::string hint = fatalHint(what, inFlight);
    std::fputs(hint.c_str(), stderr);
    std::fflush(stderr);
  }
  if (previousHandler) previousHandler();
  std::abort();
}

}  // namespace

std::string fatalHint(const std::string& what, const std::string& inFlight) {
  const bool sizes = what.find("length") != std::string::npos || what.find("nbytes") != std::string::npos ||
                     what.find("size") != std::string::npos;
  // Any uncaught exception lands here, so this names the usual culprit, not the only one.
  return "commhost gloo: FATAL: an uncaught exception is ending the process (in a process with a gloo backend, "
         "most often Gloo's own transport thread): " +
         (what.empty() ? std::string("(no message)") : what) + "\n" + "  in flight (gloo backends of this process):\n" +
         inFlight + "  " +
         (sizes ? "The check that failed is on a message's size: ranks likely passed tensors of different sizes "
                  "to the same collective. "
                : "One cause is ranks passing tensors of different sizes to the same collective. ") +
         "To find the rank and the sizes, rerun with debug.check_collectives: true in the config (or "
         "--set debug.check_collectives=true): a mismatch then fails on every rank with a diff, before "
         "anything is sent.\n";
}

void installFatalHint() {
  static std::once_flag once;
  std::call_once(once, [] { previousHandler = std::set_terminate(onTerminate); });
}

void registerForFatalHint(const GlooBackend* backend) {
  LiveBackends& r = live();
  MutexLock lock(&r.mutex);
  r.backends.insert(backend);
}

void unregisterForFatalHint(const GlooBackend* backend) {
  LiveBackends& r = live();
  MutexLock lock(&r.mutex);
  r.backends.erase(backend);
}

}  // namespace commhost::gloo_backend
