// SPDX-License-Identifier: Apache-2.0
#include "channel.h"

#include <signal.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "commhost/errors.h"
#include "commhost/types.h"

namespace commhost::shm {
namespace {

// True when `pid` no longer runs: gone, or a zombie its parent has not reaped yet.
bool processGone(pid_t pid) {
  if (::kill(pid, 0) == -1) return errno == ESRCH;
  char path[64];
  std::snprintf(path, sizeof(path), "/proc/%d/stat", static_cast<int>(pid));
  FILE* f = std::fopen(path, "r");
  if (!f) return false;
  char buf[512];
  const size_t n = std::fread(buf, 1, sizeof(buf) - 1, f);
  std::fclose(f);
  buf[n] = '\0';
  const char* close = std::strrchr(buf, ')');  // "pid (comm) S ...": comm may hold spaces
  return close && close[1] == ' ' && (close[2] == 'Z' || close[2] == 'X');
}

}  // namespace

Channel::Channel(const Segment& segment, int rank, std::string group, const AbortFlag& abort,
                 std::chrono::microseconds spin, std::chrono::microseconds yield)
    : segment_(segment),
      rank_(rank),
      world_(segment.layout().world),
      group_(std::move(group)),
      abort_(abort),
      spin_(spin),
      yield_(yield),
      consumedSeen_(world_, 0),
      postedSeen_(world_, 0),
      sources_(world_, nullptr) {}

uint8_t* Channel::begin() {
  const uint64_t depth = static_cast<uint64_t>(segment_.layout().depth);
  // Buffer s was last written at step s - depth, and peers may read it until the end of
  // step s - depth + 1 (peerPrevious): wait until they finished that step.
  if (step_ + 2 > depth) {
    const uint64_t target = step_ + 2 - depth;
    for (int p = 0; p < world_; ++p)
      // A rank posts step s only after it ended step s - 1, so posted - 1 bounds
      // consumed from below: in lockstep the peer's consumed line is never read.
      if (p != rank_ && consumedSeen_[p] < target && postedSeen_[p] < target + 1)
        await(p, segment_.control(p).consumed, target, "finish reading an earlier step");
  }
  return segment_.buffer(rank_, step_);
}

void Channel::expect(Signature sig) {
  sig.op = static_cast<uint8_t>(op_->op);
  sig.seq = static_cast<uint8_t>(op_->seq);
  sig_ = sig;
  signedStep_ = step_;
}

void Channel::publishLine(Line& line) {
  if (step_ == signedStep_) line.signature = sig_;
  line.step.store(step_ + 1, std::memory_order_release);
}

void Channel::post() {
  const bool first = step_ == signedStep_;
  if (first) publishLine(segment_.line(rank_, step_));
  RankControl& mine = segment_.control(rank_);
  publish(mine.posted, step_ + 1, mine.sleepers);
  if (first) verifySignatures();
}

const uint8_t* Channel::peer(int p) {
  if (p != rank_ && postedSeen_[p] < step_ + 1) await(p, segment_.control(p).posted, step_ + 1, "publish its data");
  return segment_.buffer(p, step_);
}

uint8_t* Channel::beginLine() {
  begin();  // the line of step s rotates with the buffer of step s: the same wait covers it
  return segment_.line(rank_, step_).data;
}

void Channel::postLine() {
  // post() publishes the line itself only in a signed step; a line step always does.
  if (step_ != signedStep_) publishLine(segment_.line(rank_, step_));
  post();
}

void Channel::awaitLine(int p, const Line& line) {
  if (p == rank_ || postedSeen_[p] >= step_ + 1) return;
  if (spinFor(spin_, [&] { return line.step.load(std::memory_order_acquire) >= step_ + 1; })) {
    postedSeen_[p] = step_ + 1;  // p began step s, so it ended s - 1: the bound begin() uses
    return;
  }
  // The slow path: yield, then sleep on p's posted counter, which p stores after the
  // line. The spin is spent: spinning again there would keep the CPU from a peer
  // sharing it for as long again.
  await(p, segment_.control(p).posted, step_ + 1, "publish its data", std::chrono::microseconds(0));
}

const uint8_t* Channel::peerLine(int p) {
  const Line& line = segment_.line(p, step_);
  awaitLine(p, line);
  return line.data;
}

namespace {
std::string describe(int rank, const Signature& s) {
  const auto op = static_cast<OpType>(s.op);
  const auto dtype = static_cast<DType>(s.dtype);
  std::string out = "rank " + std::to_string(rank) + " issued " + opName(op);
  if (op == OpType::Barrier) return out;
  // alltoall's sizes may differ per rank (its size matrix is checked apart).
  if (op == OpType::Alltoall || op == OpType::AlltoallSingle) return out + " of " + dtypeName(dtype);
  out += " of " + std::to_string(s.bytes / elementSize(dtype)) + " x " + dtypeName(dtype) + " (" +
         std::to_string(s.bytes) + " bytes";
  if (s.reduceOp != 0xff) out += std::string(", ") + reduceOpName(static_cast<ReduceOp::Kind>(s.reduceOp));
  if (s.root >= 0) out += ", root " + std::to_string(s.root);
  return out + ")";
}
}  // namespace

void Channel::verifySignatures() {
  // Every rank reads every rank's signature (even ranks whose data it never reads, as
  // a broadcast's root), so all find the same first mismatch and fail alike.
  int first = -1;
  for (int p = 0; p < world_; ++p) {
    const Line& line = segment_.line(p, step_);
    awaitLine(p, line);
    if (first < 0 && line.signature != segment_.line(0, step_).signature) first = p;
  }
  if (first < 0) return;
  const Signature theirs = segment_.line(first, step_).signature;
  const Signature zeros = segment_.line(0, step_).signature;
  // Equal arguments but another op: one rank passed more tensors to a coalesced op.
  const std::string seqs = zeros.seq == theirs.seq ? ""
                                                   : " (a different op: seq ending " + std::to_string(zeros.seq) +
                                                         " vs " + std::to_string(theirs.seq) +
                                                         " mod 256; "
                                                         "coalesced ops must pass as many tensors on every rank)";
  end();  // every rank ends this step: the step counters still agree for the next op
  const OpContext& op = *op_;
  raise(ErrorCode::InvalidArgument, {group_, rank_, opName(op.op), op.seq, first == rank_ ? 0 : first, ""},
        "the ranks issued different collectives: " + describe(0, zeros) + " but " + describe(first, theirs) + seqs +
            "; nothing was exchanged and the group stays usable",
        "Every rank must issue the same op with the same element count, dtype, reduce op and root "
        "(debug.check_collectives: true prints every rank's arguments).");
}

void Channel::end() {
  ++step_;
  RankControl& mine = segment_.control(rank_);
  publish(mine.consumed, step_, mine.sleepers);
}

void Channel::barrier() {
  begin();
  post();
  for (int p = 0; p < world_; ++p) peer(p);
  end();
}

void Channel::await(int peer, const std::atomic<uint64_t>& counter, uint64_t target, const char* what,
                    std::chrono::microseconds spin) {
  RankControl& control = segment_.control(peer);
  std::vector<uint64_t>& seen = &counter == &control.posted ? postedSeen_ : consumedSeen_;
  auto nextLivenessCheck = Clock::now();
  auto lastCheck = nextLivenessCheck;
  seen[peer] = waitAtLeast(counter, target, control.sleepers, spin, yield_, [&] {
    const auto now = Clock::now();
    // Checks come at least every few ms; a gap of seconds means this process was not
    // running (SIGSTOP, a debugger, a suspended host), which the error must say.
    if (now - lastCheck > std::chrono::seconds(1)) paused_ = std::max(paused_, now - lastCheck);
    lastCheck = now;
    if (abort_.isSet()) fail(peer, what, false);
    if (deadline_ == Clock::time_point::max()) deadline_ = now + op_->timeout;
    if (now >= deadline_) fail(peer, what, false);
    if (now >= nextLivenessCheck) {
      nextLivenessCheck = now + std::chrono::milliseconds(50);
      const int64_t pid = control.pid.load(std::memory_order_acquire);
      if (pid > 0 && processGone(static_cast<pid_t>(pid))) fail(peer, what, true);
    }
  });
}

void Channel::fail(int peer, const char* what, bool peerDead) {
  const OpContext& op = *op_;
  const ErrorContext where{group_, rank_, opName(op.op), op.seq, peer, ""};
  std::string waiting = "while waiting for rank " + std::to_string(peer) + " to " + what + " (step " +
                        std::to_string(step_) + ")";
  if (paused_ > std::chrono::seconds(1)) {
    waiting += "; meanwhile this process itself was not scheduled for " +
               std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(paused_).count()) +
               " ms (stopped by a signal or a debugger, or the host was suspended or overloaded), so its peers may "
               "have given up on it and rank " +
               std::to_string(peer) + " need not be at fault";
    if (!abort_.isSet() && !peerDead)
      raise(ErrorCode::Timeout, where, "timed out after " + std::to_string(op.timeout.count()) + " ms " + waiting,
            "If nobody stopped this process on purpose, look for what starves this host (load, swap, the VM's "
            "steal time).");
  }
  if (abort_.isSet()) raise(ErrorCode::Aborted, where, "shm backend aborted " + waiting + ": " + abort_.reason());
  if (peerDead)
    raise(ErrorCode::PeerLost, where,
          "rank " + std::to_string(peer) + " (pid " + std::to_string(segment_.control(peer).pid.load()) + ") exited " +
              waiting,
          "That process may have died; check its log.");
  raise(ErrorCode::Timeout, where, "timed out after " + std::to_string(op.timeout.count()) + " ms " + waiting,
        "Rank " + std::to_string(peer) +
            " may not have joined this collective: check that every rank issues the "
            "same ops in the same order.");
}

}  // namespace commhost::shm
