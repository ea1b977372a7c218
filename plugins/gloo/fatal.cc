// SPDX-License-Identifier: Apache-2.0
#include "fatal.h"

#include <cstdio>
#include <exception>
#include <mutex>
#include <set>

#include "gloo_backend.h"

namespace commhost::gloo_backend {
namespace {

std::mutex& registryMutex() {
  static std::mutex m;
  return m;
}
std::set<const GlooBackend*>& registry() {
  static std::set<const GlooBackend*> r;
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
  {
    std::unique_lock<std::mutex> lock(registryMutex(), std::try_to_lock);
    if (lock)
      for (const auto* backend : registry()) inFlight += "  " + backend->inFlight() + "\n";
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
  std::lock_guard<std::mutex> lock(registryMutex());
  registry().insert(backend);
}

void unregisterForFatalHint(const GlooBackend* backend) {
  std::lock_guard<std::mutex> lock(registryMutex());
  registry().erase(backend);
}

}  // namespace commhost::gloo_backend
