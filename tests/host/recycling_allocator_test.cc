// SPDX-License-Identifier: Apache-2.0
// The per-thread spare blocks behind completedWork() (core/recycling_allocator.h): a
// freed block is the next allocation of its type on the thread that freed it, a thread
// keeps a few, and a block freed on another thread goes to that thread's spares. Leaks
// (blocks kept past a thread's exit) show in the ASan run of this suite.
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "commhost/work.h"
#include "core/recycling_allocator.h"

namespace commhost {
namespace {

// Each test has a type of its own, so it starts with empty spares on every thread.
template <int N> struct Block { char bytes[48]; };

// malloc, too, hands out the block freed last: these take every small block it holds
// spare, so that a block the allocator gave back to it does not come back by chance.
struct MallocDecoys {
  std::vector<void*> taken;
  MallocDecoys() {
    for (size_t size = 16; size <= 1024; size += 16) taken.push_back(::operator new(size));
  }
  ~MallocDecoys() {
    for (void* p : taken) ::operator delete(p);
  }
};

TEST(RecyclingAllocator, AFreedBlockIsTheNextAllocationOfItsType) {
  RecyclingAllocator<Block<1>> alloc;
  Block<1>* first = alloc.allocate(1);
  alloc.deallocate(first, 1);
  MallocDecoys decoys;
  Block<1>* second = alloc.allocate(1);
  EXPECT_EQ(second, first);
  alloc.deallocate(second, 1);
}

TEST(RecyclingAllocator, AThreadKeepsFourSparesAndHandsThemOutLastFreedFirst) {
  RecyclingAllocator<Block<2>> alloc;
  std::vector<Block<2>*> blocks;
  for (int i = 0; i < 6; ++i) blocks.push_back(alloc.allocate(1));
  for (Block<2>* b : blocks) alloc.deallocate(b, 1);  // the first four are kept, the last two deleted
  for (int i = 3; i >= 0; --i) EXPECT_EQ(alloc.allocate(1), blocks[static_cast<size_t>(i)]) << "spare " << i;
  for (int i = 0; i < 4; ++i) alloc.deallocate(blocks[static_cast<size_t>(i)], 1);
}

TEST(RecyclingAllocator, AnArrayIsNeverKeptNorHandedOutAsASpare) {
  RecyclingAllocator<Block<3>> alloc;
  Block<3>* one = alloc.allocate(1);
  alloc.deallocate(one, 1);  // now a spare
  Block<3>* two = alloc.allocate(2);
  EXPECT_NE(two, one);
  alloc.deallocate(two, 2);
  EXPECT_EQ(alloc.allocate(1), one);  // the array did not join the spares either
  alloc.deallocate(one, 1);
}

TEST(RecyclingAllocator, ABlockFreedOnAnotherThreadBecomesThatThreadsSpare) {
  RecyclingAllocator<Block<4>> alloc;
  Block<4>* made = alloc.allocate(1);
  Block<4>* reused = nullptr;
  std::thread other([&] {
    alloc.deallocate(made, 1);
    MallocDecoys decoys;
    reused = alloc.allocate(1);
    alloc.deallocate(reused, 1);  // kept until this thread exits, then deleted
  });
  other.join();
  EXPECT_EQ(reused, made);
  Block<4>* mine = alloc.allocate(1);  // this thread has no spare: a fresh block
  alloc.deallocate(mine, 1);
}

TEST(RecyclingAllocator, ADroppedCompletedWorkIsTheNextOnesBlock) {
  OpContext ctx;
  ctx.group = "main";
  ctx.seq = 1;
  Tensor t = Tensor::empty({2}, DType::Float32);
  WorkPtr first = completedWork(ctx, t);
  const Work* address = first.get();
  first.reset();
  MallocDecoys decoys;
  ctx.seq = 2;
  WorkPtr second = completedWork(ctx, t);
  EXPECT_EQ(second.get(), address);
  EXPECT_EQ(second->seq(), 2u);
  EXPECT_TRUE(second->isCompleted());
  const std::vector<Tensor>& value = second->future()->wait();
  ASSERT_EQ(value.size(), 1u);
  EXPECT_EQ(value[0].data(), t.data());
}

}  // namespace
}  // namespace commhost
