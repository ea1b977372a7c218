// SPDX-License-Identifier: Apache-2.0
// CycleAnchor: FastClock's conversion of counter ticks to steady-clock nanoseconds, apart
// from the counter and the clock it reads, so tests drive it with made-up pairs.
//
// Threading: toNs() from any thread, lock-free (a sequence lock over atomics); update()
// from any thread, but one at a time: a thread that finds another updating leaves the
// anchor to it and returns false.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>

namespace commhost::detail {

class CycleAnchor {
 public:
  // A pair may stand in for `refreshNs` (toNs() refuses ticks further from it); a pair
  // whose clock reads were more than `maxWindowNs` apart sets no rate (a preempted read).
  explicit CycleAnchor(int64_t refreshNs = 10'000'000, int64_t maxWindowNs = 500)
      : refreshNs_(refreshNs), maxWindowNs_(maxWindowNs) {}

  // The steady time of `ticks`; false without a rate yet, or when `ticks` is more than
  // refreshNs from the anchor (time for update()).
  bool toNs(uint64_t ticks, int64_t& ns) const noexcept {
    const uint32_t seq = seq_.load(std::memory_order_acquire);
    if (seq & 1) return false;  // being updated
    const uint64_t ticks0 = ticks0_.load(std::memory_order_relaxed);
    const int64_t ns0 = ns0_.load(std::memory_order_relaxed);
    const uint64_t mult = mult_.load(std::memory_order_relaxed);
    const uint64_t maxTicks = maxTicks_.load(std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_acquire);
    if (seq_.load(std::memory_order_relaxed) != seq) return false;
    // Before the anchor too: a reader whose counter read came just before another
    // thread's update converts it on the new line instead of taking a pair of its own.
    const bool ahead = ticks >= ticks0;
    const uint64_t distance = ahead ? ticks - ticks0 : ticks0 - ticks;
    if (mult == 0 || distance > maxTicks) return false;
    // distance * mult <= refreshNs << 32 (maxTicks' definition): no overflow.
    const auto offset = static_cast<int64_t>((distance * mult) >> 32);
    ns = ahead ? ns0 + offset : ns0 - offset;
    return true;
  }

  // Takes a pair read together: `ns`, the midpoint of two clock reads `windowNs` apart
  // around the counter read `ticks`. The line goes on from where it passes at `ticks` when
  // that is near `ns` (readings do not step at an update), else it starts again at `ns`.
  // Its rate is measured since the last tight pair about refreshNs back, and steered to meet
  // the clock one refresh later, so the line follows the clock without jumps. A loose pair
  // (windowNs > maxWindowNs) sets no rate. False when another thread was updating.
  bool update(uint64_t ticks, int64_t ns, int64_t windowNs) noexcept {
    if (updating_.exchange(true, std::memory_order_acquire)) return false;
    // The fields below are written only here, under updating_: relaxed loads read our own.
    uint64_t mult = mult_.load(std::memory_order_relaxed);
    int64_t anchorNs = ns;
    if (mult != 0) {
      const auto since = static_cast<__int128>(static_cast<int64_t>(ticks - ticks0_.load(std::memory_order_relaxed)));
      const auto lineNs = ns0_.load(std::memory_order_relaxed) + static_cast<int64_t>((since * mult) >> 32);
      const int64_t off = lineNs > ns ? lineNs - ns : ns - lineNs;
      if (off <= refreshNs_ / 100 + windowNs) anchorNs = lineNs;
    }
    if (windowNs <= maxWindowNs_) {
      if (baseTicks_ == 0 || ticks <= baseTicks_) {
        baseTicks_ = ticks;
        baseNs_ = ns;
      } else if (ns - baseNs_ >= refreshNs_ - refreshNs_ / 8) {  // the read that finds the line expired
        const auto measured = (static_cast<__int128>(ns - baseNs_) << 32) / (ticks - baseTicks_);  // ns/tick << 32
        const __int128 refreshTicks = measured > 0 ? (static_cast<__int128>(refreshNs_) << 32) / measured : 0;
        if (refreshTicks > 0) {
          // A multiply, not << 32: ns - anchorNs is negative when the line runs ahead, and
          // shifting a negative value left is undefined (UBSan caught it under train).
          const __int128 steer = static_cast<__int128>(ns - anchorNs) * (__int128{1} << 32) / refreshTicks;
          mult = static_cast<uint64_t>(std::max<__int128>(measured + steer, measured / 2));
        }
        baseTicks_ = ticks;
        baseNs_ = ns;
      }
    }
    const uint32_t seq = seq_.load(std::memory_order_relaxed);
    seq_.store(seq + 1, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);
    ticks0_.store(ticks, std::memory_order_relaxed);
    ns0_.store(anchorNs, std::memory_order_relaxed);
    mult_.store(mult, std::memory_order_relaxed);
    maxTicks_.store(mult ? (static_cast<uint64_t>(refreshNs_) << 32) / mult : 0, std::memory_order_relaxed);
    seq_.store(seq + 2, std::memory_order_release);
    updating_.store(false, std::memory_order_release);
    return true;
  }

 private:
  const int64_t refreshNs_;
  const int64_t maxWindowNs_;
  std::atomic<uint32_t> seq_{0};  // odd while update() writes the four below
  std::atomic<uint64_t> ticks0_{0};
  std::atomic<int64_t> ns0_{0};
  std::atomic<uint64_t> mult_{0};      // ns per tick << 32; 0: no rate yet
  std::atomic<uint64_t> maxTicks_{0};  // refreshNs in ticks at mult
  std::atomic<bool> updating_{false};
  // The last tight pair, which the next rate is measured from; only update() touches it.
  uint64_t baseTicks_ = 0;
  int64_t baseNs_ = 0;
};

}  // namespace commhost::detail
