// SPDX-License-Identifier: Apache-2.0
// The lease a store puts its heartbeat keys on, and the thread that keeps it alive.
//
// The lease is granted on first use, so a store that never writes a lease key holds no
// lease and runs no thread. While the process lives, its thread renews the lease every
// quarter of its TTL; when the process dies, etcd deletes every key on the lease one TTL
// later. A lease etcd has dropped (etcd was unreachable for a whole TTL, or restarted
// from an empty data dir) is replaced on the next use: current() grants a new one.
// Threading: current() and forget() may be called from any thread; the keepalive thread
// is owned by the LeaseKeeper and joined by its destructor.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <thread>

#include "commhost/logging.h"
#include "commhost/mutex.h"
#include "http.h"

namespace commhost::etcdstore {

class LeaseKeeper {
 public:
  LeaseKeeper(Endpoint endpoint, int ttlSeconds, std::shared_ptr<Logger> logger);
  ~LeaseKeeper();
  LeaseKeeper(const LeaseKeeper&) = delete;
  LeaseKeeper& operator=(const LeaseKeeper&) = delete;

  // The lease's id, granting one first when there is none. Throws what post() throws.
  int64_t current(Clock::time_point deadline) EXCLUDES(mu_);
  // etcd said `id` is gone: the next current() grants a new lease.
  void forget(int64_t id) EXCLUDES(mu_);
  // How long one keepalive may take: a third of the TTL, so a slow one still leaves time
  // for another before the lease ends. In milliseconds: whole seconds / 3 made it 0 for
  // a TTL of 1 or 2 s, and every renewal failed at once.
  static std::chrono::milliseconds renewalBudget(int ttlSeconds) {
    return std::chrono::milliseconds(ttlSeconds * 1000 / 3);
  }

 private:
  void run() EXCLUDES(mu_);  // the keepalive thread
  bool renew(int64_t id);    // one keepalive; false when etcd no longer has the lease

  const Endpoint endpoint_;
  const int ttlSeconds_;
  const std::shared_ptr<Logger> logger_;
  Mutex mu_;
  CondVar wake_;                    // signalled when stopping
  int64_t id_ GUARDED_BY(mu_) = 0;  // 0: none granted (or dropped)
  bool stopping_ GUARDED_BY(mu_) = false;
  std::thread thread_ GUARDED_BY(mu_);  // started with the first lease
};

}  // namespace commhost::etcdstore
