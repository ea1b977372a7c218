// SPDX-License-Identifier: Apache-2.0
// Completion hooks: registered per group, run on one thread of their own, one event at a
// time, in completion order; never on a caller's, a backend's or the watchdog's thread.
#pragma once

#include <atomic>
#include <deque>
#include <map>
#include <memory>
#include <thread>
#include <utility>

#include "commhost/logging.h"
#include "commhost/mutex.h"
#include "commhost/supervisor.h"

namespace commhost::supervisor {

struct GroupMonitor;

class HookDispatcher {
 public:
  explicit HookDispatcher(std::shared_ptr<Logger> logger);
  ~HookDispatcher() { stop(); }
  // Delivers the events still queued, then ends the thread (idempotent). Never called on
  // the hook thread (see Supervisor::release).
  void stop() EXCLUDES(mu_);

  int add(const GroupMonitor* group, CompletionHook hook) EXCLUDES(mu_);
  void remove(int id) EXCLUDES(mu_);
  void removeGroup(const GroupMonitor* group) EXCLUDES(mu_);                       // every hook of the group
  void moveGroup(const GroupMonitor* from, const GroupMonitor* to) EXCLUDES(mu_);  // every hook of `from`, same ids
  bool any() const { return hasHooks_.load(std::memory_order_acquire); }
  // Queues the event for the group's hooks (any thread). Bounded: hooks slower than the
  // ops they watch lose events, and the log says so.
  void post(std::shared_ptr<GroupMonitor> group, CompletionEvent event) EXCLUDES(mu_);
  bool onHookThread() const { return std::this_thread::get_id() == thread_.get_id(); }

 private:
  void loop() EXCLUDES(mu_);
  static constexpr size_t kMaxQueued = 1 << 16;

  std::shared_ptr<Logger> logger_;
  Mutex mu_;
  CondVar wake_;
  std::map<int, std::pair<const GroupMonitor*, CompletionHook>> hooks_ GUARDED_BY(mu_);  // id -> (group, hook)
  int nextId_ GUARDED_BY(mu_) = 1;
  // The event's group is held, so its address cannot be reused by a new group meanwhile.
  std::deque<std::pair<std::shared_ptr<GroupMonitor>, CompletionEvent>> queue_ GUARDED_BY(mu_);
  size_t dropped_ GUARDED_BY(mu_) = 0;
  bool stopping_ GUARDED_BY(mu_) = false;
  std::atomic<bool> hasHooks_{false};  // lets publishing skip mu_ when nobody listens
  std::thread thread_;                 // last: starts once the members above exist
};

}  // namespace commhost::supervisor
