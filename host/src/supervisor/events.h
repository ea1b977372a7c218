// SPDX-License-Identifier: Apache-2.0
// EventLog: the last things that happened to this process's groups (a peer lost, a swap
// started, committed or rolled back, a membership change, an incident, a shadow
// disagreement), each with an id that only grows, so that `commhost status --watch`
// prints each once however often it reads.
//
// Threading: any thread may add or read; one mutex guards the ring. Events are rare (not
// per op), so they keep strings.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <vector>

#include "commhost/mutex.h"

namespace commhost::supervisor {

struct Event {
  uint64_t id = 0;  // 1, 2, ... in this process
  int64_t unixMs = 0;
  std::string kind;  // "peer_lost", "swap_started", "swap_committed", "swap_rolled_back",
                     // "membership", "incident", "shadow_disagree", "shadow_failed", "store_lost",
                     // "rerouted" (tune: live)
  std::string group;
  std::string text;  // one sentence, as the log says it
};

class EventLog {
 public:
  static constexpr size_t kEntries = 64;
  void add(std::string kind, std::string group, std::string text) EXCLUDES(mutex_);
  std::vector<Event> events() const EXCLUDES(mutex_);               // oldest first
  std::map<std::string, uint64_t> counts() const EXCLUDES(mutex_);  // every event added, by kind

 private:
  mutable Mutex mutex_;
  std::deque<Event> events_ GUARDED_BY(mutex_);  // at most kEntries
  uint64_t next_ GUARDED_BY(mutex_) = 1;
  std::map<std::string, uint64_t> counts_ GUARDED_BY(mutex_);
};

}  // namespace commhost::supervisor
