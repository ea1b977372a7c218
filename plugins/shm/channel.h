// SPDX-License-Identifier: Apache-2.0
// The step protocol over a Segment: every op is a sequence of steps that every rank of
// the group runs in the same order (ops run one at a time, in seq order, so the step
// count is global). In step s each rank
//   begin(): waits until every peer has finished reading the buffer step s reuses
//            (consumed[p] >= s + 2 - depth: a buffer may still be read, through
//            peerPrevious, in the step after its own), then returns its own buffer for s;
//   post():  after filling it, publishes posted[rank] = s + 1 (release store, then a
//            futex wake if a peer registered as sleeping; see sync.h);
//   peer(p): waits for posted[p] >= s + 1 (acquire) and returns p's buffer for s;
//   end():   publishes consumed[rank] = s + 1 the same way: it is done with step s (it
//            may still read the buffers of step s - 1 through peerPrevious in s).
// The first step of every op also carries the op's Signature (bytes, dtype, reduce op,
// root) in the rank's line; post() of that step waits for every peer's first step and
// compares before anyone reads a peer's data. On a mismatch every rank sees the same
// signatures, so every rank ends the step and throws InvalidArgument alike: the step
// counters still agree and the group stays usable. Costs two stores and two loads in a
// line the reader fetches anyway (the line path), or one cache miss per peer (buffers).
// Counters only grow (never reset), so a fast peer already at step s + 1 cannot be
// mistaken for step s: it writes another buffer, and it cannot come back to this one
// before this rank's end(). Depth >= 3 lets a rank fill step s + 1 while peers still
// read step s.
//
// Threading: a Channel is owned by the one thread running the group's current op.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "commhost/options.h"
#include "segment.h"
#include "sync.h"

namespace commhost::shm {

class Channel {
 public:
  Channel(const Segment& segment, int rank, std::string group, const AbortFlag& abort, std::chrono::microseconds spin,
          std::chrono::microseconds yield);

  int rank() const { return rank_; }
  int world() const { return world_; }
  size_t chunk() const { return segment_.layout().chunk; }

  // The op the following steps belong to (for deadlines and errors; `op` outlives them).
  // Its deadline, op.timeout on, is set by its first wait that yields: an op whose waits
  // all end spinning reads no clock for it (25 ns a read, a twentieth of a small op).
  void start(const OpContext& op) {
    op_ = &op;
    deadline_ = Clock::time_point::max();
    paused_ = Clock::duration::zero();
  }
  // The next step is the first of an op (or of one tensor of a coalesced op) that must
  // agree with the peers' on `sig` (its op is filled in from the scope).
  void expect(Signature sig);
  uint8_t* begin();
  void post();
  const uint8_t* peer(int p);
  // After peer(p) (posted[p] >= s + 1): p's buffer of step s - 1, which p may have
  // rewritten in step s (a later phase of the same op); safe while depth >= 2.
  const uint8_t* peerPrevious(int p) const { return segment_.buffer(p, step_ - 1); }
  // This rank's own buffer of step s - 1, still unread by peers until this step's post.
  uint8_t* previous() const { return segment_.buffer(rank_, step_ - 1); }
  void end();
  // The same step for data of at most Line::kBytes: beginLine() returns this rank's line
  // for step s, postLine() publishes it (line flag, then posted), peerLine(p) spins on
  // p's line flag (one cache miss for flag and data), falling back to peer()'s wait.
  uint8_t* beginLine();
  void postLine();
  const uint8_t* peerLine(int p);
  // A world-sized array for the algorithm running now (source lists), no allocation per op.
  const void** sources() { return sources_.data(); }
  // begin + post + peer(every rank) + end: a barrier, also used to exchange small data.
  void barrier();

 private:
  void publishLine(Line& line);
  // The first step's check, after this rank's own post: throws InvalidArgument (after
  // ending the step) when a peer issued something else.
  void verifySignatures();
  void awaitLine(int p, const Line& line);
  void await(int peer, const std::atomic<uint64_t>& counter, uint64_t target, const char* what) {
    await(peer, counter, target, what, spin_);
  }
  void await(int peer, const std::atomic<uint64_t>& counter, uint64_t target, const char* what,
             std::chrono::microseconds spin);
  [[noreturn]] void fail(int peer, const char* what, bool peerDead);

  const Segment& segment_;
  int rank_;
  int world_;
  std::string group_;
  const AbortFlag& abort_;
  std::chrono::microseconds spin_;
  std::chrono::microseconds yield_;
  uint64_t step_ = 0;                 // the current (or next) step
  uint64_t signedStep_ = UINT64_MAX;  // the step that carries sig_
  Signature sig_;
  std::vector<uint64_t> consumedSeen_;  // last consumed[p] this rank loaded (acquire)
  std::vector<uint64_t> postedSeen_;
  std::vector<const void*> sources_;
  const OpContext* op_ = nullptr;  // the op running now
  Clock::time_point deadline_;     // max() until the op's first yielding wait
  Clock::duration paused_{};       // the longest time this op's waits were not scheduled
};

}  // namespace commhost::shm
