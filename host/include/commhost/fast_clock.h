// SPDX-License-Identifier: Apache-2.0
// FastClock: std::chrono::steady_clock's time at about half its cost, for code that reads
// the time several times per op: the supervisor's flight recorder (two reads per op), the
// bench's per-iteration timing, a backend's spin loop, a plugin's own.
//
// Where the kernel keeps CLOCK_MONOTONIC on the CPU's time-stamp counter (x86-64 with the
// clocksource "tsc": the kernel has checked that the counter runs at one rate on every
// CPU), now() reads the counter and converts it through an anchor, a (counter, steady
// time) pair, and the counter's rate between the last two anchors. Elsewhere (another
// clocksource, another architecture) now() is steady_clock::now().
// Measured on a 2-vCPU KVM guest: steady_clock::now() 24 ns, FastClock::now() 10-11 ns
// (commhost_bench_dispatch --benchmark_filter=Clock). In a process's first 10 ms, before
// two anchors gave a rate, a read takes six of steady_clock's (three tries at a pair).
//
// Accuracy: a read that finds its anchor older than 10 ms takes a new one. The line goes
// on from where it is at the new anchor, its rate measured between anchors and steered to
// meet steady_clock one anchor later, so readings follow steady_clock (within ~1 us: pairs
// known to ~50 ns, NTP slewing CLOCK_MONOTONIC by up to 500 ppm) without steps. Only when
// the line is over 100 us off (a long pause at a rate since changed, a suspended VM) does it
// restart at steady_clock's time, which may be a step back. So FastClock is not is_steady:
// clamp durations at zero, and keep on steady_clock deadlines that must never be early.
//
// Thread-safe: any thread reads; the thread that finds the anchor old takes the next one
// while the others keep converting through the old one.
#pragma once

#include <chrono>

#include "commhost/export.h"

namespace commhost {

struct COMMHOST_API FastClock {
  using duration = std::chrono::steady_clock::duration;
  using rep = duration::rep;
  using period = duration::period;
  using time_point = std::chrono::steady_clock::time_point;  // comparable with steady_clock's
  static constexpr bool is_steady = false;

  static time_point now() noexcept;
  // Whether now() reads the time-stamp counter on this machine (false: steady_clock).
  static bool countsCycles() noexcept;
};

}  // namespace commhost
