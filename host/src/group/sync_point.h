// SPDX-License-Identifier: Apache-2.0
// Internal: the world group's config poller and the agreement syncPoint() runs (see
// sync_point.cc for the protocol and its store keys).
#pragma once

#include <chrono>
#include <string>
#include <thread>

#include "commhost/mutex.h"
#include "commhost/process_group.h"
#include "impl.h"

namespace commhost {

struct ProcessGroup::Impl::SyncAgreement {
  // The poller thread: reads the epoch key every `poll` until stopped.
  std::thread poller;
  Mutex mutex;
  CondVar wake;
  bool stop GUARDED_BY(mutex) = false;
  std::chrono::milliseconds poll{0};

  // The calling thread's: the agreement in progress (round counts finished agreements,
  // alike on every rank, and names its keys).
  uint64_t round = 0;
  bool posted = false;    // this rank's "seen" is in the store
  uint64_t epoch = 0;     // the epoch decided (0: no decision read yet)
  uint64_t joins = 0;     // the join requests decided (admitted at switchAt when above joinsDone_)
  uint64_t switchAt = 0;  // the sync count S of the decision
};

}  // namespace commhost
