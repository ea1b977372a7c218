// SPDX-License-Identifier: Apache-2.0
// RecordNamesMemo: what a group's State keeps per backend so that the per-op path finds
// its flight-recorder names without a string compare. Apart from supervisor.h so that
// the group's State can hold one without the supervisor's headers.
#pragma once

#include <atomic>

namespace commhost::supervisor {

struct RecordNames;  // thread_lanes.h
// A caller's memo of the record names of one (group, backend) of one supervisor (a
// group's State holds one per backend): track() then finds them with one load, where the
// group's own cache compares the backend's name (~5 ns of an 8 B op). Any thread; once
// set it points at names that live as long as the supervisor. A copy starts empty (a
// State copied for a live route switch fills its own).
class RecordNamesMemo {
 public:
  RecordNamesMemo() = default;
  RecordNamesMemo(const RecordNamesMemo&) {}
  RecordNamesMemo& operator=(const RecordNamesMemo&) {
    names_.store(nullptr, std::memory_order_relaxed);
    return *this;
  }

  const RecordNames* get() const { return names_.load(std::memory_order_acquire); }
  void set(const RecordNames* names) const { names_.store(names, std::memory_order_release); }

 private:
  mutable std::atomic<const RecordNames*> names_{nullptr};
};

}  // namespace commhost::supervisor
