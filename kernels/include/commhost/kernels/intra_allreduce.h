// SPDX-License-Identifier: Apache-2.0
// The intra-node one-shot / two-shot allreduce on GPUs (commhost_kernels_cuda): every
// thread of the grid runs intra::oneShot / intra::twoShot (intra_protocol.h) over a
// device Net whose buffers are this rank's and its peers' GPU memory (CUDA IPC); the Net
// is in intra_device_net.h, written against an execution environment so that the unit
// tests run the very same code on CPU threads. This header is plain C++ (no CUDA
// headers), so the nccl plugin launches the kernels and the unit tests check the layout
// and config choices without nvcc or a GPU.
//
// Memory. Each rank owns ONE region (cudaMalloc'd, peers map it): `depth` data slots of
// `slotBytes`, then a flag area of uint64 counters, per thread block b and peer p:
//   posted[b][p]    p's block b published step s: p stores s + 1 here (in the READER's
//                   region, release, system scope), so waits spin on local memory;
//   consumed[b][p]  p's block b finished reading step s (s + 1), likewise;
//   sigs[slot][b][p]  p's signature of the op whose first step uses `slot`, written
//                   before that step's posted store (the release publishes it);
//   claim           set once by the block that records a failure (below).
// Counters only grow: the host hands each launch a step base (IntraSteps), advanced by
// the algorithm's step count, so nothing is ever reset and a zeroed region starts at 0.
//
// Ordering (why the result is right). A block writes its part of a slot, __syncthreads,
// then one thread per peer does st.release.sys of the step into that peer's posted: the
// barrier plus release cumulativity publish every thread's writes. The reader's thread 0
// spins (relaxed) on its own posted, then ld.acquire.sys, then __syncthreads, so the whole
// block reads after the acquire. Copies and reductions split each range over blocks by
// index within the range, identically on every rank, so block b only reads what block b
// of the writer wrote and per-block posted flags suffice. end() is the mirror image
// (barrier, then release of consumed), and begin() acquires consumed of every block of
// every peer before a slot is rewritten (see DeviceNet::begin in intra_device_net.h).
//
// Failure. A spin gives up after the launch's timeout (%globaltimer), when the host sets
// the abort word (host-mapped), or when another block recorded a failure; on the first two,
// or when a peer's signature differs, the kernel records an IntraError (host-mapped, first
// failure wins) and that block stops touching memory. The signatures are compared in the
// first step, before the user's data is written, so ranks that disagree leave it as it
// was; a two-shot ended by a timeout or abort in step B may have copied some slices. A
// kernel launched after a recorded error does nothing. The host fails every work whose
// step base is at or after the error's (never a wrong result reported as success); the
// communicator's intra path is unusable after an error.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "commhost/kernels/intra_node.h"
#include "commhost/types.h"

namespace commhost::kernels {

constexpr int kIntraMaxRanks = 8;

// The kernel shape and buffers of one communicator. The grid must be the same on every
// rank (block b of each rank meets block b of the others), so it is chosen from values
// the ranks agreed on (the smallest SM count among them), never from local ones.
struct IntraConfig {
  int blocks = 0;        // thread blocks per launch, all co-resident (<= the SM count)
  int threads = 0;       // threads per block
  int depth = 3;         // slots per rank: 3 lets step B read step A's slot with no extra wait
  size_t slotBytes = 0;  // one slot; no message may exceed it
  bool operator==(const IntraConfig& o) const {
    return blocks == o.blocks && threads == o.threads && depth == o.depth && slotBytes == o.slotBytes;
  }
};
constexpr int kIntraMaxBlocks = 24;
constexpr int kIntraThreads = 512;
// minSmCount: the fewest SMs of any rank's device; bufferBytes: the largest message
// (IntraLimits::bufferBytes), rounded up to 256 bytes per slot.
IntraConfig chooseIntraConfig(int minSmCount, size_t bufferBytes);

// Byte offsets inside a region (all 256-byte aligned).
struct IntraLayout {
  size_t posted = 0;      // uint64 posted[blocks][kIntraMaxRanks]
  size_t consumed = 0;    // uint64 consumed[blocks][kIntraMaxRanks]
  size_t signatures = 0;  // uint64 sigs[depth][blocks][kIntraMaxRanks]
  size_t claim = 0;       // uint32: non-zero once a launch recorded a failure (IntraError)
  size_t bytes = 0;       // the whole region
  size_t flagBytes = 0;   // from `posted` to the end: zeroed before first use
};
IntraLayout intraLayout(const IntraConfig& config);

// What ranks must agree on before they exchange data: element count, dtype, reduce op and
// algorithm, packed into a non-zero word (bit 63 set).
uint64_t intraSignature(size_t count, DType dtype, ReduceOp::Kind op, IntraAlgo algo);
std::string describeIntraSignature(uint64_t signature);  // "1024 x f32 sum (one-shot)"

// Steps per call, and the per-communicator step base: take() returns the base of the next
// call and advances by its steps. Every rank issues the same calls, so the bases agree.
int intraSteps(IntraAlgo algo);  // one-shot 1, two-shot 2 (intra::kOneShotSteps, kTwoShotSteps)
class IntraSteps {
 public:
  uint64_t take(IntraAlgo algo) {
    const uint64_t base = next_;
    next_ += static_cast<uint64_t>(intraSteps(algo));
    return base;
  }
  uint64_t next() const { return next_; }

 private:
  uint64_t next_ = 0;
};

// The first failure of any launch of a communicator, in host-mapped memory. The thread
// whose atomicCAS on the region's claim word (device memory: GPU atomics on host memory
// are not atomic over PCIe) succeeds fills the fields, fences, then stores `code` (release),
// so a host that reads a non-zero code reads the fields it guards.
enum IntraErrorCode : uint32_t {
  kIntraOk = 0,
  kIntraTimeout = 1,   // a wait ran past the launch's timeout
  kIntraAborted = 2,   // the host set the abort word
  kIntraMismatch = 3,  // a peer's signature differs (mine, theirs)
};
enum IntraWait : uint32_t { kIntraWaitPosted = 1, kIntraWaitConsumed = 2 };
struct IntraError {
  uint32_t code = kIntraOk;
  uint32_t block = 0;
  int32_t peer = -1;
  uint32_t wait = 0;      // IntraWait for timeouts and aborts
  uint64_t step = 0;      // the step that failed
  uint64_t stepBase = 0;  // the failing launch's step base
  uint64_t mine = 0;      // signatures, for kIntraMismatch
  uint64_t theirs = 0;
};
// "peer 2 did not post its step within the timeout (block 3, step 17)" and the like.
std::string describeIntraError(const IntraError& e);

// One launch. Pointers are device pointers as this process sees them.
struct IntraLaunch {
  void* data = nullptr;  // the tensor, reduced in place
  size_t count = 0;      // elements; count * elementSize(dtype) <= config.slotBytes
  DType dtype = DType::Float32;
  ReduceOp::Kind op = ReduceOp::Sum;
  float factor = 1.0f;  // applied once to each result: finalScale (Avg 1/world, PreMulSum)
  IntraAlgo algo = IntraAlgo::OneShot;
  int rank = 0;
  int world = 0;
  uint8_t* regions[kIntraMaxRanks] = {};  // every rank's region (this rank's own included)
  IntraConfig config;
  IntraLayout layout;
  uint64_t stepBase = 0;
  uint64_t signature = 0;               // intraSignature of this call
  uint64_t timeoutNs = 0;               // per wait; 0: wait forever (the abort word still ends it)
  const uint32_t* abortWord = nullptr;  // host-mapped; non-zero: stop
  IntraError* error = nullptr;          // host-mapped
};

// Queues the kernel on `stream` (a cudaStream_t). Returns the cudaError_t of the launch
// as an int (0: queued); cudaErrorInvalidValue (1) for arguments the kernels do not serve
// (dtype not f32/f16/bf16, op not sum/avg/premul_sum, algo not one-/two-shot, too many
// ranks, a message larger than a slot). Only in commhost_kernels_cuda.
int launchIntraAllreduce(const IntraLaunch& args, void* stream);

}  // namespace commhost::kernels
