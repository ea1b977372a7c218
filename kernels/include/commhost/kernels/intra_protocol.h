// SPDX-License-Identifier: Apache-2.0
// The intra-node allreduce protocol (intra_node_comm's one-shot and two-shot): which rank
// writes what into which buffer in which step, and whose post it waits for before it
// reads. It is written once, against a "Net", and runs in three places:
//   - the shm backend: the Net is its Channel over a shared-memory segment;
//   - the CUDA kernels: the Net is this rank's and its peers' GPU buffers (CUDA IPC)
//     with system-scope flags, every thread of the grid running the same steps;
//   - tests/kernels/intra_protocol_test.cc: CPU threads over a checking Net that fails on
//     any read of a buffer not yet posted or already reused, so the schedule is tested
//     here, without a GPU.
//
// The Net contract. A step is begin, fill, post, read peers, end; every rank runs the same
// steps in the same order (the protocol below depends only on rank, world and n).
//   int rank() const, world() const;
//   uint8_t* begin();             this rank's buffer for the next step s, once no peer can
//                                 still read what it held (the Net's depth decides when)
//   void post();                  this rank's buffer for s is complete
//   const uint8_t* peer(int p);   waits until p posted s; p's buffer for s (p == rank: own)
//   const uint8_t* peerPrevious(int p);  after peer(p) in s: p's buffer of step s - 1,
//                                 still intact (Nets keep at least two steps)
//   uint8_t* previous();          this rank's own buffer of step s - 1
//   void end();                   this rank has finished reading step s (and s - 1)
//   const void** sources();       a world-sized scratch array
//   void copy(void* dst, const void* src, size_t n);                  n elements
//   void reduce(void* dst, const void* const* srcs, size_t n);        n elements
//       dst[i] = the reduction of srcs[0..world)[i], folded in rank order with the final
//       scale (Avg, PreMulSum) applied once, so every rank computes the same bits.
// On a GPU each thread block waits only for its peers' matching blocks, so a Net splits
// copy and reduce over blocks by the index within the range it is given. The protocol
// passes identical ranges for what one rank writes and another reads (whole slices),
// which keeps every block's reads inside what the same block of the writer posted.
//
// Usable from CUDA (__host__ __device__) and plain C++: no exceptions, no std algorithms.
#pragma once

#include <cstddef>
#include <cstdint>

#include "commhost/dtype_storage.h"  // COMMHOST_HD

namespace commhost::kernels::intra {

// Steps each algorithm takes per chunk: the Nets' counters advance by this much per call.
constexpr int kOneShotSteps = 1;
constexpr int kTwoShotSteps = 2;

COMMHOST_HD inline size_t minSize(size_t a, size_t b) { return a < b ? a : b; }

// Two-shot's ownership of n elements: rank r reduces and publishes [lo(r), lo(r + 1)).
// Slices are `align` elements long (a cache line, or a GPU vector) except the last ones,
// which may be short or empty when n is small.
struct Slices {
  size_t n = 0;
  size_t per = 0;
  COMMHOST_HD size_t lo(int r) const { return minSize(n, per * static_cast<size_t>(r)); }
  COMMHOST_HD size_t count(int r) const { return lo(r + 1) - lo(r); }
};
COMMHOST_HD inline Slices twoShotSlices(size_t n, int world, size_t align) {
  const size_t w = static_cast<size_t>(world);
  return {n, ((n + w - 1) / w + align - 1) / align * align};
}

// One step: every rank copies its n elements into its buffer, then reduces every rank's
// buffer (its own included, rank order) into its data.
template <class Net> COMMHOST_HD void oneShot(Net& net, uint8_t* data, size_t n, size_t elementSize) {
  net.copy(net.begin(), data, n);
  net.post();
  const void** srcs = net.sources();
  for (int p = 0; p < net.world(); ++p) srcs[p] = net.peer(p);
  net.reduce(data, srcs, n);
  net.end();
  (void)elementSize;
}

// Two steps:
//   A (reduce-scatter): each rank copies into its buffer the slices its peers own (not
//     its own), posts, then reduces its own slice from its own data and each peer's copy
//     (rank order) into its own slice of its buffer, which no peer reads in A;
//   B (allgather): a bare post; then each rank copies every slice, reduced, out of its
//     owner's step-A buffer (peerPrevious), its own from previous().
template <class Net> COMMHOST_HD void twoShot(Net& net, uint8_t* data, size_t n, size_t elementSize, size_t align) {
  const int world = net.world(), me = net.rank();
  const Slices s = twoShotSlices(n, world, align);
  const size_t es = elementSize;
  uint8_t* mine = net.begin();
  for (int p = 0; p < world; ++p)
    if (p != me && s.count(p)) net.copy(mine + s.lo(p) * es, data + s.lo(p) * es, s.count(p));
  net.post();
  const void** srcs = net.sources();
  for (int p = 0; p < world; ++p) srcs[p] = p == me ? data + s.lo(me) * es : net.peer(p) + s.lo(me) * es;
  if (s.count(me)) net.reduce(mine + s.lo(me) * es, srcs, s.count(me));
  net.end();

  net.begin();
  net.post();
  for (int p = 0; p < world; ++p) {
    const uint8_t* owner = p == me ? net.previous() : (net.peer(p), net.peerPrevious(p));
    if (s.count(p)) net.copy(data + s.lo(p) * es, owner + s.lo(p) * es, s.count(p));
  }
  net.end();
}

}  // namespace commhost::kernels::intra
