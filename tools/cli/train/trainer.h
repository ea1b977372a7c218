// SPDX-License-Identifier: Apache-2.0
// The training loop behind `commhost train` (cmd_train.cc parses the flags and joins the
// job): data-parallel SGD of the MLP through the Reducer, --check against one process on
// the global batch, and, with supervisor.on_peer_loss: shrink, recovery from a lost rank.
//
// Joining: a process started with group.join (commhost run --max-restarts) joins the
// running job (commhost::init returns once the members admitted it at a sync point); it
// takes the state as a survivor of a recovery does, and so do the members, right after
// the syncPoint() that grew the group.
//
// Recovery: a step that fails because a peer was lost (PeerLostError, or the group
// aborted for it) is discarded. The survivors call ProcessGroup::shrink(); then the
// member that completed the most steps (a rank may have finished the step before it
// noticed the loss) broadcasts its parameters and step count, and every survivor takes
// them, rebuilds the Reducer and the comm hook for the new size, re-shards the global
// batch over the ranks left and runs the step again. Every step still trains on the
// whole global batch (the shards cover it at any size, and gradients are scaled by
// world/batch), so --check compares with the same reference as without a loss.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "../bench/swap.h"
#include "commhost/errors.h"
#include "commhost/process_group.h"
#include "commhost/reducer.h"
#include "mlp.h"
#include "report.h"

namespace commhost::cli::train {

struct TrainArgs {
  int epochs = 5;
  int stepsPerEpoch = 20;
  int64_t batch = 256;
  int hidden = 256;
  int layers = 4;
  double lr = 0.1;
  int64_t seed = 1;
  // Scaled down from c10d's 25 and 1 MiB to this small model (about 0.5 MiB of
  // gradients by default), so that it has several buckets and overlap to show.
  double bucketCapMb = 0.25;
  double firstBucketCapMb = 0.0625;
  bool check = false;
  double tolerance = 1e-4;
  int64_t evalBatch = 1024;
  std::string hook;
  std::vector<std::string> sets;
  std::string jsonFile;
  int swapEvery = 0;    // --swap-every N: hot swap every N steps (0: never)
  std::string configs;  // --configs a.yaml,b.yaml: what --swap-every cycles through
};

// The hook the config names for the gradients, for the header; and whether it is the
// exact average, which --check holds to float tolerance.
struct HookChoice {
  std::string name;
  bool exact = true;
};

class Trainer {
 public:
  Trainer(const TrainArgs& args, HookChoice hook, TrainReport& report, std::shared_ptr<ProcessGroup> group,
          Swapper* swapper);
  int run();  // the process's exit status

 private:
  void rebuild();  // the Reducer, the hook, the shard and the scale for the group as it is now
  // One step on this rank's shard; a failed collective throws.
  StepRecord step(int64_t step, int epoch);
  // With supervisor.on_peer_loss: shrink and a failure a lost peer explains: shrinks the
  // group and takes the state of the member furthest ahead; returns the step to run next.
  // Returns -1 when the failure is not one to recover from.
  int64_t recover(const Error& error, int64_t step);
  ShrinkReport shrinkAgain();           // pg_.shrink(), run again when a member was lost during the round
  int64_t adoptFurthest(int64_t step);  // returns the step the group continues from
  // After a syncPoint(): when the group grew (ranks joined), hands the joiners the state
  // as a recovery does and rebuilds for the new size.
  void followGrowth(int64_t step);
  void referenceUpTo(int64_t steps);
  bool reporter() const;  // the job's rank 0, whatever its rank in the group now
  int check(int64_t steps, double initialLoss, double finalLoss);

  const TrainArgs& a_;
  const HookChoice hook_;
  TrainReport& report_;
  std::shared_ptr<ProcessGroup> group_;
  ProcessGroup& pg_;
  Swapper* swapper_;
  const bool elastic_;
  MlpShape shape_;
  Teacher teacher_;
  Mlp model_;
  std::unique_ptr<Mlp> reference_;
  int64_t referenceSteps_ = 0;
  std::unique_ptr<Reducer> reducer_;
  int64_t begin_ = 0, end_ = 0;  // this rank's shard of each global batch
  float scale_ = 1;
  int failedRecoveries_ = 0;  // recoveries in a row without a step completed
  std::vector<int> members_;  // the group's global ranks when the Reducer was built
  int64_t start_ = 0;         // the first step: 0, or where the job was when this rank joined it
};

}  // namespace commhost::cli::train
