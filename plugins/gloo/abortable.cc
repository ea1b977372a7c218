// SPDX-License-Identifier: Apache-2.0
#include "abortable.h"

#include <gloo/common/error.h>

#include <algorithm>
#include <string>
#include <utility>

namespace commhost::gloo_backend {

namespace {

[[noreturn]] void throwAborted(const char* what) {
  // IoException, as a failed connection throws: Gloo's algorithms unwind through it, and
  // the backend describes it with the abort's reason (GlooBackend::describe).
  throw ::gloo::IoException(std::string("the backend was aborted during a ") + what);
}

// Forwards to Gloo's buffer, so Gloo's pairs only ever see their own type. Waits that
// abortAll() ends, and every call after it, throw.
class TrackedBuffer final : public ::gloo::transport::UnboundBuffer {
 public:
  TrackedBuffer(std::unique_ptr<::gloo::transport::UnboundBuffer> inner, std::shared_ptr<AbortRegistry> registry)
      : ::gloo::transport::UnboundBuffer(inner->ptr, inner->size),
        inner_(std::move(inner)),
        registry_(std::move(registry)) {
    registry_->add(inner_.get());
  }
  ~TrackedBuffer() override { registry_->remove(inner_.get()); }

  bool waitRecv(int* rank, std::chrono::milliseconds timeout) override {
    if (registry_->aborted() || !inner_->waitRecv(rank, timeout)) throwAborted("receive wait");
    return true;
  }
  bool waitSend(int* rank, std::chrono::milliseconds timeout) override {
    if (registry_->aborted() || !inner_->waitSend(rank, timeout)) throwAborted("send wait");
    return true;
  }
  void abortWaitRecv() override { inner_->abortWaitRecv(); }
  void abortWaitSend() override { inner_->abortWaitSend(); }

  void send(int dstRank, uint64_t slot, size_t offset, size_t nbytes) override {
    if (registry_->aborted()) throwAborted("send");
    inner_->send(dstRank, slot, offset, nbytes);
  }
  void recv(int srcRank, uint64_t slot, size_t offset, size_t nbytes) override {
    if (registry_->aborted()) throwAborted("receive");
    inner_->recv(srcRank, slot, offset, nbytes);
  }
  void recv(std::vector<int> srcRanks, uint64_t slot, size_t offset, size_t nbytes) override {
    if (registry_->aborted()) throwAborted("receive");
    inner_->recv(std::move(srcRanks), slot, offset, nbytes);
  }

 private:
  std::unique_ptr<::gloo::transport::UnboundBuffer> inner_;
  std::shared_ptr<AbortRegistry> registry_;
};

// Gloo's abortWait* mark the buffer and wake its waiter (a wait that starts later
// returns at once); they take the buffer's own lock only, never the registry's.
void endWaits(::gloo::transport::UnboundBuffer* buffer) {
  buffer->abortWaitSend();
  buffer->abortWaitRecv();
}

}  // namespace

void AbortRegistry::abortAll() {
  MutexLock lock(&mu_);
  aborted_.store(true, std::memory_order_release);
  for (auto* buffer : live_) endWaits(buffer);
}

void AbortRegistry::add(::gloo::transport::UnboundBuffer* buffer) {
  MutexLock lock(&mu_);
  live_.push_back(buffer);
  // Made after abortAll(): its first wait returns at once, like those of the others.
  if (aborted_.load(std::memory_order_relaxed)) endWaits(buffer);
}

void AbortRegistry::remove(::gloo::transport::UnboundBuffer* buffer) {
  MutexLock lock(&mu_);
  auto it = std::find(live_.begin(), live_.end(), buffer);
  if (it == live_.end()) return;
  *it = live_.back();
  live_.pop_back();
}

AbortableContext::AbortableContext(std::shared_ptr<::gloo::transport::Context> connected,
                                   std::shared_ptr<AbortRegistry> registry)
    : ::gloo::transport::Context(connected->rank, connected->size),
      inner_(std::move(connected)),
      registry_(std::move(registry)) {
  setTimeout(inner_->getTimeout());
}

std::unique_ptr<::gloo::transport::UnboundBuffer> AbortableContext::createUnboundBuffer(void* ptr, size_t size) {
  return std::make_unique<TrackedBuffer>(inner_->createUnboundBuffer(ptr, size), registry_);
}

}  // namespace commhost::gloo_backend
