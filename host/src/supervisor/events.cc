// SPDX-License-Identifier: Apache-2.0
#include "events.h"

#include "flight_recorder.h"

namespace commhost::supervisor {

void EventLog::add(std::string kind, std::string group, std::string text) {
  Event e;
  e.unixMs = wallMicros() / 1000;
  e.kind = std::move(kind);
  e.group = std::move(group);
  e.text = std::move(text);
  MutexLock lock(&mutex_);
  e.id = next_++;
  ++counts_[e.kind];
  if (events_.size() >= kEntries) events_.pop_front();
  events_.push_back(std::move(e));
}

std::vector<Event> EventLog::events() const {
  MutexLock lock(&mutex_);
  return {events_.begin(), events_.end()};
}

std::map<std::string, uint64_t> EventLog::counts() const {
  MutexLock lock(&mutex_);
  return counts_;
}

}  // namespace commhost::supervisor
