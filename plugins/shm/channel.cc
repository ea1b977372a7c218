#include "channel.h"

#include <signal.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "commhost/errors.h"

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

void Channel::post() {
  RankControl& mine = segment_.control(rank_);
  publish(mine.posted, step_ + 1, mine.sleepers);
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
  segment_.line(rank_, step_).step.store(step_ + 1, std::memory_order_release);
  post();
}

const uint8_t* Channel::peerLine(int p) {
  const Line& line = segment_.line(p, step_);
  if (p == rank_ || postedSeen_[p] >= step_ + 1) return line.data;
  const auto until = Clock::now() + spin_;
  do {
    for (int i = 0; i < 64; ++i) {
      if (line.step.load(std::memory_order_acquire) >= step_ + 1) {
        postedSeen_[p] = step_ + 1;  // p began step s, so it ended s - 1: the bound begin() uses
        return line.data;
      }
      cpuRelax();
    }
  } while (Clock::now() < until);
  peer(p);  // the slow path: sleep on p's posted counter, which p stores after the line
  return line.data;
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

void Channel::await(int peer, const std::atomic<uint64_t>& counter, uint64_t target, const char* what) {
  RankControl& control = segment_.control(peer);
  std::vector<uint64_t>& seen = &counter == &control.posted ? postedSeen_ : consumedSeen_;
  auto nextLivenessCheck = Clock::now();
  seen[peer] = waitAtLeast(counter, target, control.sleepers, spin_, yield_, [&] {
    const auto now = Clock::now();
    if (abort_.isSet()) fail(peer, what, false);
    if (now >= scope_.deadline) fail(peer, what, false);
    if (now >= nextLivenessCheck) {
      nextLivenessCheck = now + std::chrono::milliseconds(50);
      const int64_t pid = control.pid.load(std::memory_order_acquire);
      if (pid > 0 && processGone(static_cast<pid_t>(pid))) fail(peer, what, true);
    }
  });
}

void Channel::fail(int peer, const char* what, bool peerDead) {
  const OpContext& op = *scope_.op;
  const ErrorContext where{group_, rank_, opName(op.op), op.seq, peer, ""};
  const std::string waiting = "while waiting for rank " + std::to_string(peer) + " to " + what + " (step " +
                              std::to_string(step_) + ")";
  if (abort_.isSet()) raise(ErrorCode::Aborted, where, "shm backend aborted " + waiting + ": " + abort_.reason());
  if (peerDead)
    raise(ErrorCode::PeerLost, where,
          "rank " + std::to_string(peer) + " (pid " + std::to_string(segment_.control(peer).pid.load()) +
              ") exited " + waiting,
          "That process may have died; check its log.");
  raise(ErrorCode::Timeout, where,
        "timed out after " + std::to_string(op.timeout.count()) + " ms " + waiting,
        "Rank " + std::to_string(peer) + " may not have joined this collective: check that every rank issues the "
        "same ops in the same order.");
}

}  // namespace commhost::shm
