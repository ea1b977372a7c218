// SPDX-License-Identifier: Apache-2.0
// The shared-memory segment of one group: a header, one control block per rank and one
// data slot per rank (`depth` buffers of `chunk` bytes, used round-robin by step).
//
//   [header | control[0..world) | lines[world][depth] | slot[0] | slot[1] | ... ]
//   (each part page-aligned)
//
// Group rank 0 creates the segment (O_EXCL, mode 0600) under a name that carries its pid,
// the other ranks map it by name, and rank 0 unlinks the name as soon as every rank has
// mapped it, so nothing is left in /dev/shm once a group is up, even if a rank is
// killed later. Names of segments whose creator died before unlinking are removed by
// the next create (removeStaleSegments).
//
// Threading: a Segment is immutable after construction; the atomics inside the mapping
// are the only shared state and their protocol is in channel.h.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace commhost::shm {

static_assert(std::atomic<uint64_t>::is_always_lock_free, "the shm protocol needs lock-free 64-bit atomics");

// Written by its rank only (except sleepers), read by every rank. Each counter sits on its own 128-byte
// line so a rank polling one does not slow the writer of another (adjacent-line prefetch).
struct RankControl {
  alignas(128) std::atomic<uint64_t> posted;  // steps whose data this rank has published
  // Peers asleep on this rank's posted or consumed futex (their low 32 bits); the
  // owner wakes them after a store only when this is non-zero. Peers add/subtract.
  std::atomic<uint32_t> sleepers;
  alignas(128) std::atomic<uint64_t> consumed;  // steps this rank has finished reading
  alignas(128) std::atomic<int64_t> pid;        // the rank's process, for liveness checks
};

// What an op's ranks must agree on, published in the line of the op's first step and
// compared by every rank before it reads any peer's data (Channel::post).
struct Signature {
  uint64_t bytes = 0;       // what every rank moves (alltoall: 0, its size matrix is checked apart)
  uint8_t op = 0;           // OpType
  uint8_t dtype = 0;        // DType
  uint8_t reduceOp = 0xff;  // ReduceOp::Kind, 0xff: none
  uint8_t seq = 0;          // the op's seq, low 8 bits: the tensors of a coalesced op that one
                            // rank passes more of cannot pair with another rank's next op
  int32_t root = -1;        // -1: none
  bool operator==(const Signature& o) const {
    return bytes == o.bytes && op == o.op && dtype == o.dtype && reduceOp == o.reduceOp && seq == o.seq &&
           root == o.root;
  }
  bool operator!=(const Signature& o) const { return !(*this == o); }
};
static_assert(sizeof(Signature) == 16, "a Signature is two words");

// One cache line per rank and buffer index: the first step of every op publishes its
// Signature here (with the flag), and tiny steps their data too, so a reader takes one
// cache miss for flag, signature and data. Written by its rank.
struct Line {
  static constexpr size_t kBytes = 40;
  alignas(64) std::atomic<uint64_t> step;  // s + 1 once signature/data hold step s (release)
  Signature signature;                     // valid when step s is the first step of an op
  uint8_t data[kBytes];
};
static_assert(sizeof(Line) == 64, "a Line is one cache line");

struct SegmentLayout {
  int world = 0;
  size_t chunk = 0;  // bytes per buffer
  int depth = 0;     // buffers per rank
  size_t slotBytes() const { return chunk * static_cast<size_t>(depth); }
  size_t controlOffset() const;
  size_t lineOffset() const;
  size_t dataOffset() const;
  size_t totalBytes() const;
};

class Segment {
 public:
  // Rank 0: removes stale segments, then creates and initialises a new one.
  static std::unique_ptr<Segment> create(const std::string& name, const SegmentLayout& layout);
  // Other ranks: maps `name` and checks its header against `layout`.
  static std::unique_ptr<Segment> open(const std::string& name, const SegmentLayout& layout);
  ~Segment();
  Segment(const Segment&) = delete;
  Segment& operator=(const Segment&) = delete;

  // Removes the name (rank 0, once every rank mapped it); the mapping stays valid.
  void unlink();
  const std::string& name() const { return name_; }
  const SegmentLayout& layout() const { return layout_; }
  RankControl& control(int rank) const;
  // The line `rank` writes at `step` (same rotation as buffer()).
  Line& line(int rank, uint64_t step) const {
    return lines_[static_cast<size_t>(rank) * static_cast<size_t>(layout_.depth) +
                  static_cast<size_t>(step % static_cast<uint64_t>(layout_.depth))];
  }
  // The buffer `rank` writes at `step`.
  uint8_t* buffer(int rank, uint64_t step) const {
    return data_ + static_cast<size_t>(rank) * layout_.slotBytes() +
           static_cast<size_t>(step % static_cast<uint64_t>(layout_.depth)) * layout_.chunk;
  }

 private:
  Segment(std::string name, SegmentLayout layout, void* base, bool owner);
  std::string name_;
  SegmentLayout layout_;
  uint8_t* base_;
  uint8_t* data_;
  Line* lines_;
  bool owner_;
  bool linked_;
};

// "/commhost-shm-<jobhash>-<pid>-<groupid>": jobhash from the group and backend names,
// pid of the creator, groupid counting the groups this process created.
std::string segmentName(const std::string& groupName, const std::string& backendName);
// Unlinks /dev/shm/commhost-shm-* whose creator pid no longer exists; returns how many.
int removeStaleSegments();

}  // namespace commhost::shm
