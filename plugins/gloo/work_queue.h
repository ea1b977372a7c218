// The gloo backend's worker threads (c10d's AsyncWork queue): every op is queued with
// its AsyncWork and run by the first free worker, in submission order.
//
// Threading: enqueue/abort/drain may be called from any thread; `queue_`, `running_`
// and `stopping_`/`aborted_` are guarded by `mutex_`. A worker owns the op it runs.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "commhost/work.h"

namespace commhost::gloo_backend {

class WorkQueue {
 public:
  using Job = std::function<std::vector<Tensor>()>;
  // Turns a job's exception into the error its work fails with (adding rank, op, seq).
  using Describe = std::function<std::exception_ptr(const OpContext&, std::exception_ptr)>;

  // threads == 0: every job runs inside enqueue(), on the caller's thread.
  WorkQueue(int threads, Describe describe);
  ~WorkQueue();  // drains, then joins the workers

  // The work finishes with the job's outputs, or fails with its described error.
  // Throws AbortedError after abort(). `work` lets the job finish it itself (e.g. with
  // a source rank); finishing it again is then a no-op.
  WorkPtr enqueue(const OpContext& ctx, Job job, std::shared_ptr<AsyncWork> work = nullptr);
  // Fails every queued and running work with AbortedError; later enqueues throw.
  // Jobs already inside Gloo keep their thread until Gloo's own timeout.
  void abort(const std::string& reason);
  // Waits until nothing is queued or running.
  void drain();
  // True when abort() was called and a job is still inside Gloo (which returns only at
  // its own timeout): the owner may then leak this queue instead of joining it.
  bool stuckAfterAbort();

 private:
  struct Item {
    std::shared_ptr<AsyncWork> work;
    Job job;
    OpContext context;
  };
  void workerLoop();

  Describe describe_;
  std::mutex mutex_;
  std::condition_variable wake_;   // workers: an item or stop
  std::condition_variable idle_;   // drain(): queue empty and nothing running
  std::deque<Item> queue_;
  std::set<std::shared_ptr<AsyncWork>> running_;
  bool stopping_ = false;
  std::string aborted_;            // the abort reason; empty until abort()
  std::vector<std::thread> workers_;
};

}  // namespace commhost::gloo_backend
