// SPDX-License-Identifier: Apache-2.0
#include "algorithms.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "commhost/errors.h"
#include "commhost/kernels/intra_protocol.h"
#include "commhost/kernels/reduce.h"

namespace commhost::shm {
namespace {

uint8_t* bytesOf(void* p) { return static_cast<uint8_t*>(p); }
const uint8_t* bytesOf(const void* p) { return static_cast<const uint8_t*>(p); }
// A 0-byte op still runs one step, with perhaps a null tensor pointer: memcpy must not see it.
void copyBytes(void* dst, const void* src, size_t n) {
  if (n) std::memcpy(dst, src, n);
}

// Sources of this step (every rank's buffer + offset, rank order) into ch.sources().
const void* const* peerSources(Channel& ch, size_t offset) {
  const void** srcs = ch.sources();
  for (int p = 0; p < ch.world(); ++p) srcs[p] = ch.peer(p) + offset;
  return srcs;
}

// Per-destination block of a step: chunk / world, rounded down to 64 bytes (and whole elements).
size_t blockBytes(const Channel& ch, size_t elementSize) {
  size_t block = ch.chunk() / static_cast<size_t>(ch.world()) / 64 * 64;
  return block / elementSize * elementSize;
}

// The Net of the intra-node allreduce protocol (commhost/kernels/intra_protocol.h) over
// the Channel: the same schedule the CUDA kernels run, with memcpy and the CPU reduction.
class ChannelNet {
 public:
  ChannelNet(Channel& ch, DType dtype, const ReduceOp& op)
      : ch_(ch), dtype_(dtype), es_(elementSize(dtype)), kind_(op.kind), factor_(kernels::finalScale(op, ch.world())) {}
  int rank() const { return ch_.rank(); }
  int world() const { return ch_.world(); }
  uint8_t* begin() { return ch_.begin(); }
  void post() { ch_.post(); }
  const uint8_t* peer(int p) { return ch_.peer(p); }
  const uint8_t* peerPrevious(int p) const { return ch_.peerPrevious(p); }
  uint8_t* previous() const { return ch_.previous(); }
  void end() { ch_.end(); }
  const void** sources() { return ch_.sources(); }
  void copy(void* dst, const void* src, size_t n) { copyBytes(dst, src, n * es_); }
  void reduce(void* dst, const void* const* srcs, size_t n) {
    kernels::reduceSourcesBuffer(dst, srcs, ch_.world(), n, dtype_, kind_, factor_);
  }

 private:
  Channel& ch_;
  DType dtype_;
  size_t es_;
  ReduceOp::Kind kind_;
  double factor_;
};

}  // namespace

// Every loop below runs at least one step, even for 0 bytes: the first step carries the
// op's signature (Channel::expect), so ranks disagreeing on the size still meet there.
void allreduceOneShot(Channel& ch, void* data, size_t count, DType dtype, const ReduceOp& op) {
  const size_t es = elementSize(dtype);
  if (count * es <= Line::kBytes) {  // the latency path: data and flag in one cache line
    copyBytes(ch.beginLine(), data, count * es);
    ch.postLine();
    const void** srcs = ch.sources();
    for (int p = 0; p < ch.world(); ++p) srcs[p] = ch.peerLine(p);
    kernels::reduceSourcesBuffer(data, srcs, ch.world(), count, dtype, op.kind, kernels::finalScale(op, ch.world()));
    ch.end();
    return;
  }
  ChannelNet net(ch, dtype, op);
  const size_t perStep = ch.chunk() / es;
  for (size_t off = 0; off == 0 || off < count; off += perStep)
    kernels::intra::oneShot(net, bytesOf(data) + off * es, std::min(perStep, count - off), es);
}

void allreduceTwoShot(Channel& ch, void* data, size_t count, DType dtype, const ReduceOp& op) {
  const size_t es = elementSize(dtype);
  const size_t perStep = ch.chunk() / es;
  const size_t align = std::max<size_t>(1, 64 / es);  // slices start on cache lines
  ChannelNet net(ch, dtype, op);
  for (size_t off = 0; off == 0 || off < count; off += perStep)
    kernels::intra::twoShot(net, bytesOf(data) + off * es, std::min(perStep, count - off), es, align);
}

void reduce(Channel& ch, void* data, size_t count, DType dtype, const ReduceOp& op, int root) {
  const size_t es = elementSize(dtype);
  const size_t perStep = ch.chunk() / es;
  for (size_t off = 0; off == 0 || off < count; off += perStep) {
    const size_t n = std::min(perStep, count - off);
    copyBytes(ch.begin(), bytesOf(data) + off * es, n * es);
    ch.post();
    if (ch.rank() == root) {
      kernels::reduceSourcesBuffer(bytesOf(data) + off * es, peerSources(ch, 0), ch.world(), n, dtype, op.kind,
                                   kernels::finalScale(op, ch.world()));
    }
    ch.end();
  }
}

void broadcast(Channel& ch, void* data, size_t bytes, int root) {
  for (size_t off = 0; off == 0 || off < bytes; off += ch.chunk()) {
    const size_t n = std::min(ch.chunk(), bytes - off);
    uint8_t* mine = ch.begin();
    if (ch.rank() == root) copyBytes(mine, bytesOf(data) + off, n);
    ch.post();
    if (ch.rank() != root) copyBytes(bytesOf(data) + off, ch.peer(root), n);
    ch.end();
  }
}

void gather(Channel& ch, const void* in, size_t bytes, void* const* outs, int root) {
  for (size_t off = 0; off == 0 || off < bytes; off += ch.chunk()) {
    const size_t n = std::min(ch.chunk(), bytes - off);
    copyBytes(ch.begin(), bytesOf(in) + off, n);
    ch.post();
    if (root < 0 || ch.rank() == root)
      for (int p = 0; p < ch.world(); ++p) copyBytes(bytesOf(outs[p]) + off, ch.peer(p), n);
    ch.end();
  }
}

void scatter(Channel& ch, const void* const* ins, void* out, size_t bytes, int root) {
  const size_t block = blockBytes(ch, 1);
  for (size_t off = 0; off == 0 || off < bytes; off += block) {
    const size_t n = std::min(block, bytes - off);
    uint8_t* mine = ch.begin();
    if (ch.rank() == root)
      for (int d = 0; d < ch.world(); ++d) copyBytes(mine + block * d, bytesOf(ins[d]) + off, n);
    ch.post();
    copyBytes(bytesOf(out) + off, ch.peer(root) + block * ch.rank(), n);
    ch.end();
  }
}

void reduceScatter(Channel& ch, const void* const* ins, void* out, size_t count, DType dtype, const ReduceOp& op) {
  const size_t es = elementSize(dtype);
  const size_t block = blockBytes(ch, es), perStep = block / es;
  for (size_t off = 0; off == 0 || off < count; off += perStep) {
    const size_t n = std::min(perStep, count - off);
    uint8_t* mine = ch.begin();
    for (int d = 0; d < ch.world(); ++d) copyBytes(mine + block * d, bytesOf(ins[d]) + off * es, n * es);
    ch.post();
    uint8_t* dst = bytesOf(out) + off * es;
    kernels::reduceSourcesBuffer(dst, peerSources(ch, block * ch.rank()), ch.world(), n, dtype, op.kind,
                                 kernels::finalScale(op, ch.world()));
    ch.end();
  }
}

void alltoall(Channel& ch, const void* const* ins, const size_t* inBytes, void* const* outs, const size_t* outBytes) {
  const int world = ch.world();
  // Step 0: every rank publishes what it sends and expects; every rank checks the whole
  // matrix, so all agree on the step count and on any mismatch (and all throw alike).
  auto* sizes = reinterpret_cast<uint64_t*>(ch.begin());
  for (int d = 0; d < world; ++d) {
    sizes[d] = inBytes[d];
    sizes[world + d] = outBytes[d];
  }
  ch.post();
  size_t most = 0;
  std::string mismatch;
  for (int s = 0; s < world; ++s) {
    const auto* row = reinterpret_cast<const uint64_t*>(ch.peer(s));
    for (int d = 0; d < world && mismatch.empty(); ++d) {
      const auto* dRow = reinterpret_cast<const uint64_t*>(ch.peer(d));
      if (row[d] != dRow[world + s])
        mismatch = "rank " + std::to_string(s) + " sends " + std::to_string(row[d]) + " bytes to rank " +
                   std::to_string(d) + ", which expects " + std::to_string(dRow[world + s]);
      most = std::max<size_t>(most, row[d]);
    }
  }
  ch.end();
  if (!mismatch.empty())
    throw InvalidArgument("shm alltoall: " + mismatch +
                          "; every rank's output split sizes must match what the "
                          "others send it");
  const size_t block = blockBytes(ch, 1);
  for (size_t off = 0; off < most; off += block) {
    uint8_t* mine = ch.begin();
    for (int d = 0; d < world; ++d)
      if (inBytes[d] > off) copyBytes(mine + block * d, bytesOf(ins[d]) + off, std::min(block, inBytes[d] - off));
    ch.post();
    for (int s = 0; s < world; ++s)
      if (outBytes[s] > off)
        copyBytes(bytesOf(outs[s]) + off, ch.peer(s) + block * ch.rank(), std::min(block, outBytes[s] - off));
    ch.end();
  }
}

}  // namespace commhost::shm
