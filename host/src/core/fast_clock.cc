// SPDX-License-Identifier: Apache-2.0
#include "commhost/fast_clock.h"

#include <cstdint>
#include <fstream>
#include <string>

#include "cycle_anchor.h"

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

namespace commhost {
namespace {

using Steady = std::chrono::steady_clock;

int64_t steadyNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Steady::now().time_since_epoch()).count();
}

#if defined(__x86_64__)
// The kernel keeps CLOCK_MONOTONIC on the counter only when it found the counter invariant
// and in step across CPUs; its choice is the test (a CPUID flag alone is not: a VM may
// show it for a counter the host migrates).
bool kernelUsesTsc() {
  std::ifstream in("/sys/devices/system/clocksource/clocksource0/current_clocksource");
  std::string name;
  return static_cast<bool>(in >> name) && name == "tsc";
}

detail::CycleAnchor& anchor() {
  static detail::CycleAnchor a;
  return a;
}

// A pair read together, the counter between two clock reads; of three tries the one whose
// clock reads were closest (a try preempted in between is dropped).
FastClock::time_point reanchor() {
  int64_t bestNs = 0, bestWindow = INT64_MAX;
  uint64_t bestTicks = 0;
  for (int i = 0; i < 3; ++i) {
    const int64_t before = steadyNs();
    const uint64_t ticks = __rdtsc();
    const int64_t after = steadyNs();
    if (after - before < bestWindow) {
      bestWindow = after - before;
      bestNs = before + (after - before) / 2;
      bestTicks = ticks;
    }
  }
  // Read back through the line, which update() may continue rather than move to bestNs
  // (toNs() leaves ns as it is when there is no rate yet).
  int64_t ns = bestNs;
  if (anchor().update(bestTicks, bestNs, bestWindow)) anchor().toNs(bestTicks, ns);
  return FastClock::time_point(std::chrono::nanoseconds(ns));
}
#endif

}  // namespace

bool FastClock::countsCycles() noexcept {
#if defined(__x86_64__)
  static const bool tsc = kernelUsesTsc();
  return tsc;
#else
  return false;
#endif
}

FastClock::time_point FastClock::now() noexcept {
#if defined(__x86_64__)
  if (countsCycles()) {
    int64_t ns;
    if (anchor().toNs(__rdtsc(), ns)) return time_point(std::chrono::nanoseconds(ns));
    return reanchor();
  }
#endif
  return Steady::now();
}

}  // namespace commhost
