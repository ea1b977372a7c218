// SPDX-License-Identifier: Apache-2.0
#include "hook_dispatcher.h"

#include <vector>

#include "group_monitor.h"

namespace commhost::supervisor {

HookDispatcher::HookDispatcher(std::shared_ptr<Logger> logger)
    : logger_(std::move(logger)), thread_([this] { loop(); }) {}

void HookDispatcher::stop() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
  }
  wake_.signalAll();
  if (thread_.joinable()) thread_.join();
}

int HookDispatcher::add(const GroupMonitor* group, CompletionHook hook) {
  MutexLock lock(&mu_);
  const int id = nextId_++;
  hooks_[id] = {group, std::move(hook)};
  hasHooks_.store(true, std::memory_order_release);
  return id;
}

void HookDispatcher::remove(int id) {
  MutexLock lock(&mu_);
  hooks_.erase(id);
  hasHooks_.store(!hooks_.empty(), std::memory_order_release);
}

void HookDispatcher::removeGroup(const GroupMonitor* group) {
  MutexLock lock(&mu_);
  for (auto it = hooks_.begin(); it != hooks_.end();) it = it->second.first == group ? hooks_.erase(it) : std::next(it);
  hasHooks_.store(!hooks_.empty(), std::memory_order_release);
}

void HookDispatcher::moveGroup(const GroupMonitor* from, const GroupMonitor* to) {
  MutexLock lock(&mu_);
  for (auto& [id, hook] : hooks_)
    if (hook.first == from) hook.first = to;
}

void HookDispatcher::post(std::shared_ptr<GroupMonitor> group, CompletionEvent ev) {
  {
    MutexLock lock(&mu_);
    if (queue_.size() >= kMaxQueued) {
      if (dropped_++ % kMaxQueued == 0)
        logger_->warn("[group " + ev.group + " rank " + std::to_string(ev.rank) + "] completion hooks are " +
                      std::to_string(kMaxQueued) + " events behind; " + std::to_string(dropped_) + " dropped so far (" +
                      opName(ev.op) + " seq " + std::to_string(ev.seq) +
                      " among them). Next: make the hooks cheaper, or hand their work to a thread of yours");
      return;
    }
    queue_.emplace_back(std::move(group), std::move(ev));
  }
  wake_.signal();
}

void HookDispatcher::loop() {
  for (;;) {
    std::shared_ptr<GroupMonitor> group;
    CompletionEvent ev;
    std::vector<std::pair<int, CompletionHook>> hooks;  // a hook may add or remove hooks
    {
      MutexLock lock(&mu_);
      while (queue_.empty() && !stopping_) wake_.wait(&mu_);
      if (queue_.empty()) return;  // stopping, with every queued event delivered
      std::tie(group, ev) = std::move(queue_.front());
      queue_.pop_front();
      for (const auto& [id, entry] : hooks_)
        if (entry.first == group.get()) hooks.emplace_back(id, entry.second);
    }
    for (auto& [id, hook] : hooks) {
      std::string problem;
      try {
        hook(ev);
      } catch (const std::exception& e) {
        problem = e.what();
      } catch (...) {
        problem = "an exception that is not a std::exception";
      }
      if (!problem.empty())
        logger_->error("[group " + ev.group + " rank " + std::to_string(ev.rank) + "] completion hook " +
                       std::to_string(id) + " threw on " + opName(ev.op) + " seq " + std::to_string(ev.seq) + ": " +
                       problem + "; fix the hook (it stays registered)");
    }
    // The copies (and what the hooks capture, the group perhaps) go here, without mu_:
    // their destructors may end a group, which removes its hooks (takes mu_) and may
    // release the supervisor, whose owner then stops it from another thread.
  }
}

}  // namespace commhost::supervisor
