// SPDX-License-Identifier: Apache-2.0
// The shm collectives, written against the Channel's step protocol on raw buffers.
// Every function runs the same number of steps on every rank for the same call (sizes
// agree across ranks; alltoall first exchanges its sizes), so the global step count
// stays in lockstep. Each step moves at most chunk() bytes per rank through the segment.
//
// Threading: run by the thread that owns the Channel, one op at a time.
#pragma once

#include <cstddef>

#include "channel.h"
#include "commhost/types.h"

namespace commhost::shm {

// The allreduces run the intra-node protocol of commhost/kernels/intra_protocol.h, the
// schedule the CUDA one-/two-shot kernels run too, a chunk at a time.
// One-shot: each step every rank copies a chunk in, then reduces all ranks' chunks
// (in rank order, so every rank gets the same bits) into its output. Up to 56 bytes the
// chunk travels with its flag in one cache line (Channel::beginLine), outside the protocol.
void allreduceOneShot(Channel& ch, void* data, size_t count, DType dtype, const ReduceOp& op);
// Two-shot, per chunk in two steps (reduce-scatter, then allgather out of the owners'
// step-A buffers); see intra::twoShot.
void allreduceTwoShot(Channel& ch, void* data, size_t count, DType dtype, const ReduceOp& op);
void reduce(Channel& ch, void* data, size_t count, DType dtype, const ReduceOp& op, int root);
void broadcast(Channel& ch, void* data, size_t bytes, int root);
// outs has one buffer of `bytes` per rank; root < 0: every rank gathers (allgather),
// else only root does (gather; outs is ignored elsewhere).
void gather(Channel& ch, const void* in, size_t bytes, void* const* outs, int root);
// ins (root only) has one buffer of `bytes` per rank.
void scatter(Channel& ch, const void* const* ins, void* out, size_t bytes, int root);
// ins has one buffer of `count` elements per rank; out receives this rank's reduction.
void reduceScatter(Channel& ch, const void* const* ins, void* out, size_t count, DType dtype, const ReduceOp& op);
// ins[d] (inBytes[d]) goes to rank d; outs[s] (outBytes[s]) comes from rank s. Sizes are
// exchanged first; a mismatch with what the peer sends throws InvalidArgument.
void alltoall(Channel& ch, const void* const* ins, const size_t* inBytes, void* const* outs, const size_t* outBytes);

}  // namespace commhost::shm
