// SPDX-License-Identifier: Apache-2.0
#include "lease.h"

#include "kv.h"

namespace commhost::etcdstore {

LeaseKeeper::LeaseKeeper(Endpoint endpoint, int ttlSeconds, std::shared_ptr<Logger> logger)
    : endpoint_(std::move(endpoint)), ttlSeconds_(ttlSeconds), logger_(std::move(logger)) {}

LeaseKeeper::~LeaseKeeper() {
  std::thread thread;
  {
    MutexLock lock(&mu_);
    stopping_ = true;
    thread = std::move(thread_);
  }
  wake_.signalAll();
  // The lease is not revoked: its keys go one TTL later, as a dead process's would, so
  // peers see a rank that left and one that died the same way.
  if (thread.joinable()) thread.join();
}

int64_t LeaseKeeper::current(Clock::time_point deadline) {
  MutexLock lock(&mu_);
  if (id_ != 0) return id_;
  // Granted under the lock so that concurrent first users share one lease.
  const nlohmann::json answer = post(endpoint_, "/v3/lease/grant", {{"TTL", std::to_string(ttlSeconds_)}}, deadline);
  id_ = int64Field(answer, "ID");
  if (id_ == 0) throw CallFailed("etcd at " + endpoint_.text() + " granted no lease: " + answer.dump(), false);
  if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
  return id_;
}

void LeaseKeeper::forget(int64_t id) {
  MutexLock lock(&mu_);
  if (id_ == id) id_ = 0;
}

bool LeaseKeeper::renew(int64_t id) {
  const auto deadline = Clock::now() + renewalBudget(ttlSeconds_);
  const nlohmann::json answer = post(endpoint_, "/v3/lease/keepalive", {{"ID", std::to_string(id)}}, deadline);
  // One keepalive answers {"result": {"ID", "TTL"}}; TTL absent (0): the lease is gone.
  return int64Field(answer.value("result", nlohmann::json::object()), "TTL") > 0;
}

void LeaseKeeper::run() {
  // A quarter of the TTL: three renewals may fail (or come late on a busy host) before etcd drops it.
  const auto every = std::chrono::milliseconds(ttlSeconds_ * 1000 / 4);
  bool failing = false;  // log the first failure of a streak, and the recovery
  while (true) {
    int64_t id = 0;
    {
      MutexLock lock(&mu_);
      if (!stopping_) wake_.waitFor(&mu_, every);
      if (stopping_) return;
      id = id_;
    }
    if (id == 0) continue;
    std::string problem;  // no lock held over the network call
    bool alive = true;
    try {
      alive = renew(id);
    } catch (const std::exception& e) {
      problem = e.what();
    }
    if (!alive) {
      forget(id);
      if (logger_)
        logger_->warn("etcd store: etcd at " + endpoint_.text() + " dropped lease " + std::to_string(id) +
                      " (its heartbeat keys are gone); the next heartbeat puts them on a new lease");
    } else if (!problem.empty() && !failing && logger_) {
      logger_->warn("etcd store: cannot renew lease " + std::to_string(id) + " at " + endpoint_.text() + ": " +
                    problem + "; retrying every " + std::to_string(every.count()) +
                    " ms (heartbeat keys expire if this lasts " + std::to_string(ttlSeconds_) + " s)");
    } else if (problem.empty() && failing && logger_) {
      logger_->info("etcd store: lease " + std::to_string(id) + " renewed again at " + endpoint_.text());
    }
    failing = !problem.empty();
  }
}

}  // namespace commhost::etcdstore
