// SPDX-License-Identifier: Apache-2.0
// Makes every wait of a backend's Gloo ops end at abort(), whatever state the backend's
// connections are in.
//
// Why: a wait on a Gloo buffer ends when the op completes, when its connection fails, or
// at the timeout (group.timeout). A send Gloo could not write because the connection was
// reset (its async writev path takes EPIPE and ECONNRESET as "not yet", and queues the
// send) is not among the ops a failed connection fails: Gloo's Pair::signalException
// walks its queue for the old bound buffers only (libgloo-dev 0.0~git20220518, and
// upstream still). So a rank that sent to a peer which died, or whose socket abort() had
// just shut down, waited in waitSend for the whole group.timeout: a survivor of an
// elastic job sat 30 s in the failed step while the others waited for it in shrink().
//
// How: after a context has connected, its transport context is wrapped
// (AbortableContext): every buffer Gloo's algorithms and the p2p ops create comes out of
// it wrapped too (forwarding to Gloo's), and is listed in the backend's AbortRegistry for
// as long as it lives. abortAll() ends every listed buffer's waits (Gloo's own
// abortWaitSend/abortWaitRecv), and those waits then throw ::gloo::IoException, as a
// failed connection does, so the algorithm unwinds; waits and posts after abortAll()
// throw at once. Gloo's pairs, the connections and everything else stay Gloo's.
//
// Threading: buffers are created, used and destroyed on the ops' threads (workers, or
// callers); abortAll() from any thread. A buffer leaves the registry before it is
// destroyed, under the registry's mutex, so abortAll() never touches a destroyed one.
#pragma once

#include <gloo/rendezvous/context.h>
#include <gloo/transport/context.h>
#include <gloo/transport/unbound_buffer.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <vector>

#include "commhost/mutex.h"

namespace commhost::gloo_backend {

class AbortRegistry {
 public:
  // Ends the waits of every buffer alive now, and of every buffer made from now on.
  void abortAll() EXCLUDES(mu_);
  bool aborted() const { return aborted_.load(std::memory_order_acquire); }

  // The wrapped buffers' bookkeeping (abortable.cc).
  void add(::gloo::transport::UnboundBuffer* buffer) EXCLUDES(mu_);
  void remove(::gloo::transport::UnboundBuffer* buffer) EXCLUDES(mu_);

 private:
  mutable Mutex mu_;
  // Gloo's buffers (not the wrappers): few at a time, one to three per op in flight.
  std::vector<::gloo::transport::UnboundBuffer*> live_ GUARDED_BY(mu_);
  std::atomic<bool> aborted_{false};  // set once, under mu_
};

// A connected transport context, wrapped: pairs are the wrapped context's; unbound
// buffers are wrapped and listed in `registry`. Made after connectFullMesh, so none of
// Gloo's connecting calls (which differ between Gloo versions) pass through it.
class AbortableContext final : public ::gloo::transport::Context {
 public:
  AbortableContext(std::shared_ptr<::gloo::transport::Context> connected, std::shared_ptr<AbortRegistry> registry);

  std::unique_ptr<::gloo::transport::Pair>& getPair(int rank) override { return inner_->getPair(rank); }
  std::unique_ptr<::gloo::transport::Pair>& createPair(int rank) override { return inner_->createPair(rank); }
  std::unique_ptr<::gloo::transport::UnboundBuffer> createUnboundBuffer(void* ptr, size_t size) override;

 private:
  std::shared_ptr<::gloo::transport::Context> inner_;
  std::shared_ptr<AbortRegistry> registry_;
};

// A rendezvous context finished after connecting: its timeout set again (Gloo copies the
// context's timeout into its transport context, the default wait of every unbound
// buffer, when it connects, and into each pair, its connect wait, 5x), and its transport
// context wrapped so that abort() ends its buffers' waits (above).
class MeshContext final : public ::gloo::rendezvous::Context {
 public:
  using ::gloo::rendezvous::Context::Context;
  // After connectFullMesh.
  void finishConnect(std::chrono::milliseconds timeout, std::shared_ptr<AbortRegistry> registry) {
    setTimeout(timeout);
    transportContext_->setTimeout(timeout);
    transportContext_ = std::make_shared<AbortableContext>(std::move(transportContext_), std::move(registry));
  }
};

}  // namespace commhost::gloo_backend
