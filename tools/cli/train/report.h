// SPDX-License-Identifier: Apache-2.0
// What `commhost train` prints, from rank 0 only: the loss per epoch (and a progress bar
// while an epoch runs, only when standard output is a terminal: under `commhost run` it
// is a pipe and would fill the log with carriage returns), the summary at the end, and
// with --json FILE one JSON object per step for jq and plotting.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "commhost/reducer.h"

namespace commhost::cli::train {

// One step, as rank 0 saw it.
struct StepRecord {
  int64_t step = 0;
  int epoch = 0;
  double loss = 0;        // rank 0's shard, before the step's update
  double stepMs = 0;      // forward, backward, finalize and the SGD update
  double commMs = 0;      // first bucket launched to last bucket done
  double backwardMs = 0;  // prepareForBackward() to the last markReady()
  double waitMs = 0;      // finalize() waiting: communication not hidden behind backward
  double hidden = 0;      // 1 - waitMs / commMs, within [0, 1]
  int64_t bytes = 0;      // gradient bytes handed to the hook
  int64_t wireBytes = 0;  // bytes the step's collectives carried (ProcessGroup::bytesIssued)
  size_t buckets = 0;
  uint64_t generation = 0;  // the group's config generation during the step (a hot swap adds 1)
  std::string config;       // that generation's config (its source: a file name or "<default>")
  std::string configLabel;  // its source, hash and backends, for the per-generation summary ("" : config)
  int world = 0;            // the group's size during the step (smaller after a shrink)
  int64_t endUnixMs = 0;    // wall clock at the step's end (to measure from a kill to the next step)
};

// The survivors of a lost rank shrank the group and went on (Trainer::recover), or the
// group grew by ranks that joined it (Trainer::followGrowth).
struct RecoveryRecord {
  std::string kind;        // "shrink" or "grow"
  int64_t failedStep = 0;  // the step that failed (discarded); -1 for a grow
  int64_t resumeStep = 0;  // the step the group runs next (later, when a rank had finished failedStep)
  int worldBefore = 0, world = 0;
  uint64_t generation = 0;   // the group's generation after the shrink
  std::vector<int> removed;  // global ranks
  std::vector<int> joined;   // global ranks
  double shrinkMs = 0;       // ProcessGroup::shrink()
  double recoverMs = 0;      // shrink, state broadcast and Reducer rebuild
  std::string error;         // why the step failed
};

// A step's communication figures from the Reducer's stats (the step's own fields, the
// loss and the step time, are left for the caller). commMs is the time during which
// some bucket was in flight: the union of the buckets' [launch, launch + comm].
StepRecord stepRecord(const ReducerStats& stats);

class TrainReport {
 public:
  // Opens (truncates) jsonPath when given; throws InvalidArgument naming it if it cannot.
  // `append`: a restarted rank 0 adds to the file its first process wrote.
  TrainReport(bool leader, const std::string& jsonPath, int epochs, int stepsPerEpoch, bool append = false);
  ~TrainReport();
  TrainReport(const TrainReport&) = delete;
  TrainReport& operator=(const TrainReport&) = delete;

  void step(const StepRecord& r);
  void recovery(const RecoveryRecord& r);  // a line, and a JSON object with "event": "shrink"
  // `evalLoss` on the held-out batch after the epoch (epoch 0: before training).
  void epoch(int epoch, double evalLoss);
  // Means over the steps after the first (which builds and then rebuilds the buckets).
  // With more than one config generation (a hot swap), also the step time per generation.
  void summary();
  // Where the text goes: standard output, or standard error with --json -.
  std::FILE* text() const { return out_; }

 private:
  // Sums of a run of steps, the first kept apart: a summary leaves out its first step when
  // it has others (the initial buckets, a new generation's first use of its backends).
  // Running sums, not the steps themselves: a job of millions of steps keeps a few bytes.
  struct Sums {
    size_t count = 0;
    double stepMs = 0, backwardMs = 0, commMs = 0, waitMs = 0, bytes = 0, wireBytes = 0, buckets = 0;
    void add(const StepRecord& r);
  };
  struct Stretch {  // steps on one config generation
    uint64_t generation = 0;
    std::string label;
    int world = 0;
    int64_t fromStep = 0, toStep = 0;
    Sums first, rest;
    const Sums& mean() const { return rest.count ? rest : first; }
  };
  void generationSummary();

  bool leader_, bar_;
  int epochs_, stepsPerEpoch_;
  std::FILE* json_ = nullptr;
  std::FILE* out_ = stdout;
  Sums firstStep_, laterSteps_;     // the whole run
  std::vector<Stretch> stretches_;  // one per generation change
  std::vector<RecoveryRecord> recoveries_;
  double epochLossSum_ = 0;
  int epochSteps_ = 0;
};

}  // namespace commhost::cli::train
