// SPDX-License-Identifier: Apache-2.0
// Internal: shadow mode. A route's `shadow: NAME` runs a sampled share of its calls on
// backend NAME too, over copies of the data, and compares the results (RouteSpec in
// config.h; ProcessGroup::shadowReport).
//
// The path of a sampled call, all on the issuing thread until the works complete:
//   Call::issue()       picks the shadow when seq hashes below the route's rate (the same
//                       calls on every rank: a shadow backend sees only its sampled calls,
//                       in the same order everywhere)
//   ShadowOp::start()   copies the input before the primary may change it (in place ops)
//   ShadowOp::run()     issues the shadow op on the copies right after the primary and
//                       returns a ShadowWork around the primary's work
// When the primary completes, ShadowWork's gate future copies the primary's output before
// the caller can see completion (wait(), isCompleted() and future() all go through the
// gate), so the caller may reuse its buffer at once. The second of the two completions
// (primary snapshot, shadow) compares and records, on whichever backend thread completes
// last; nothing waits for the shadow on the caller's path.
//
// Threads: ShadowStats is shared by the group and the callbacks (which may outlive the
// group); its mutex guards the records. A Sample is shared by its two callbacks; its atomic
// counter makes the second one compare, after both wrote their half.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "commhost/mutex.h"
#include "commhost/process_group.h"
#include "group_state.h"
#include "live_routes.h"

namespace commhost {

namespace supervisor {
class Supervisor;
}

struct ShadowStats {
  // One comparison's outcome: "" (agreed), else what differed or failed.
  void add(const std::string& op, const std::string& backend, const std::string& shadow, int64_t bytes,
           double backendUs, double shadowUs, bool failed, const std::string& detail);
  // Waits up to `waitInFlight` for every begun sample to be added.
  std::vector<ShadowRecord> report(std::chrono::milliseconds waitInFlight = {}) const;
  void begin();  // a sample was issued; add() ends it

 private:
  using Key = std::tuple<std::string, std::string, std::string, int64_t>;  // op, backend, shadow, size class
  mutable Mutex mutex_;
  std::map<Key, ShadowRecord> records_ GUARDED_BY(mutex_);
  int64_t inFlight_ GUARDED_BY(mutex_) = 0;
  mutable CondVar settled_;  // inFlight_ reached 0
};

// Compares two results of `dtype` ("" when they agree within rtol/atol, exactly for
// integers); otherwise the first differing element and both values.
std::string shadowCompare(const Tensor& primary, const Tensor& shadow, double rtol, double atol);

class ShadowOp {
 public:
  // Issues `issueFn` on the shadow backend over copies of `input` (an in-place op when
  // `outputLike` is null, else into a fresh tensor shaped like it); the returned work
  // stands for `primary` and finishes the comparison. `primaryOutput` is the caller's
  // result tensor. Constructed just before the primary is issued (the input copy and the
  // primary's start time are taken then); run() right after.
  using IssueFn = std::function<WorkPtr(Backend& shadow, const OpContext& ctx, Tensor& output, Tensor& input)>;
  struct Target {
    Backend* backend;
    std::string backendName, shadowName;
    double rtol, atol;
    std::shared_ptr<ShadowStats> stats;
    std::shared_ptr<supervisor::Supervisor> supervisor;  // null: no flight recorder
    std::shared_ptr<LiveStats> live;                     // tune: live: where the sample counts too; else null
    LiveKey liveKey;                                     // its cell and pair (the size class is set on add)
  };
  ShadowOp(Target target, const OpContext& ctx, int64_t bytes, const Tensor& input, const Tensor* outputLike);
  WorkPtr run(WorkPtr primary, const Tensor& primaryOutput, const IssueFn& issueFn);

 private:
  Target target_;
  OpContext ctx_;
  int64_t bytes_;
  Tensor input_, output_;  // the shadow's own buffers
  bool inPlace_;
  std::chrono::steady_clock::time_point created_;  // just before the primary is issued: its start
};

}  // namespace commhost
