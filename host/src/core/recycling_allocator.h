// SPDX-License-Identifier: Apache-2.0
// Internal: an allocator that keeps a few freed blocks per thread for the next allocation
// of the same type, for objects made and freed once per op (completedWork()'s
// TensorWork, with its shared_ptr control block, through std::allocate_shared).
//
// Why: an 8 B op that a backend completes inline makes one such work and its caller drops
// it; malloc and free were about 110 of the ~1950 instructions of such an op (callgrind of
// BM_ShmDispatch, loop and all). A pop and a push from a thread-local list are a handful.
//
// Ownership: each thread owns its list. A block goes to the list of the thread that frees
// it (often another than the one that made it: any thread may drop the last reference),
// and only that thread takes it again, so no list is ever shared. At most kKeep blocks
// wait per thread and type; the rest go back to operator delete, as do all of a thread's
// blocks when it exits. A block freed by a thread that is exiting (another thread_local's
// destructor dropping a work) skips the list.
#pragma once

#include <cstddef>
#include <new>

namespace commhost {

template <class T> class RecyclingAllocator {
 public:
  using value_type = T;
  RecyclingAllocator() = default;
  template <class U> RecyclingAllocator(const RecyclingAllocator<U>&) {}  // NOLINT: rebinding is implicit

  T* allocate(std::size_t n) {
    if (n == 1 && list_.head) {
      Free* block = list_.head;
      list_.head = block->next;
      --list_.count;
      return reinterpret_cast<T*>(block);
    }
    return static_cast<T*>(::operator new(n * sizeof(T)));
  }

  void deallocate(T* p, std::size_t n) {
    if (n == 1 && list_.count < kKeep && (list_.state == kOpen || (list_.state == kUnset && open()))) {
      Free* block = reinterpret_cast<Free*>(p);
      block->next = list_.head;
      list_.head = block;
      ++list_.count;
      return;
    }
    ::operator delete(p);
  }

  template <class U> bool operator==(const RecyclingAllocator<U>&) const { return true; }
  template <class U> bool operator!=(const RecyclingAllocator<U>&) const { return false; }

 private:
  static constexpr int kKeep = 4;  // a caller holding a few works at once still reuses
  struct Free {
    Free* next;
  };
  static_assert(sizeof(T) >= sizeof(Free), "a block must hold the list's link");
  enum State : int { kUnset, kOpen, kClosed };
  // Plain data with initial-exec TLS: no guard and no __tls_get_addr call per op (this is
  // in libcommhost, loaded with the program or its Python module, whose static TLS block
  // has room for it, as for ThreadLanes' lane).
  struct List {
    Free* head;
    int count;
    int state;
  };
  static inline thread_local List list_ __attribute__((tls_model("initial-exec"))){nullptr, 0, kUnset};
  // Frees the thread's blocks when it exits; made on the thread's first free, so a thread
  // that never frees a work registers no destructor.
  struct Keeper {
    ~Keeper() {
      list_.state = kClosed;
      while (Free* block = list_.head) {
        list_.head = block->next;
        ::operator delete(block);
      }
      list_.count = 0;
    }
  };
  __attribute__((noinline)) static bool open() {
    thread_local Keeper keeper;
    (void)keeper;
    list_.state = kOpen;
    return true;
  }
};

}  // namespace commhost
