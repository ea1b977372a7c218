// SPDX-License-Identifier: Apache-2.0
#include "trainer.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>

#include "../bench/report.h"
#include "commhost/sdk/comm_hook.h"

namespace commhost::cli::train {
namespace {

int64_t mib(double mb) { return static_cast<int64_t>(mb * 1024.0 * 1024.0); }
double ms(std::chrono::nanoseconds d) { return std::chrono::duration<double, std::milli>(d).count(); }

MlpShape shapeOf(const TrainArgs& a) {
  MlpShape shape;
  shape.hidden = a.hidden;
  shape.layers = a.layers;
  return shape;
}

// A config generation as the per-generation summary names it: the file alone would read
// the same for every edit of a watched file (gloo and shm generations alike).
std::string configLabel(const Config& cfg) {
  char hash[17];
  std::snprintf(hash, sizeof hash, "%016llx", static_cast<unsigned long long>(cfg.hash));
  std::string backends;
  for (const auto& entry : cfg.backends) backends += (backends.empty() ? "" : ",") + entry.first;
  return cfg.source + ", hash " + std::string(hash, 8) + ", backends " + backends;
}

std::vector<ParamInfo> paramInfos(const Mlp& m) {
  std::vector<ParamInfo> params;
  for (size_t i = 0; i < m.numParams(); ++i) {
    const auto shape = m.paramShape(i);
    ParamInfo p;
    p.shape = Shape(shape.begin(), shape.end());
    p.name = m.paramName(i);
    params.push_back(p);
  }
  return params;
}

int64_t reduceOne(ProcessGroup& pg, int64_t value, ReduceOp op) {
  Tensor t = Tensor::empty({1}, DType::Int64);
  t.data_as<int64_t>()[0] = value;
  AllreduceOptions o;
  o.reduceOp = op;
  pg.allreduce(t, o)->wait();
  return t.data_as<int64_t>()[0];
}

// A rank lost this many times in a row without a step completing between is not a lost
// rank but a failure that shrinking does not cure: the job ends with it.
constexpr int kMaxRecoveriesWithoutProgress = 3;
// Membership rounds one recovery runs before it gives up (each failed for a member lost
// during it: a few ranks dying one after another).
constexpr int kShrinkAttempts = 3;

}  // namespace

Trainer::Trainer(const TrainArgs& args, HookChoice hook, TrainReport& report, std::shared_ptr<ProcessGroup> group,
                 Swapper* swapper)
    : a_(args),
      hook_(std::move(hook)),
      report_(report),
      group_(std::move(group)),
      pg_(*group_),
      swapper_(swapper),
      elastic_(pg_.config().host.getString("supervisor.on_peer_loss") == "shrink"),
      shape_(shapeOf(args)),
      teacher_(shape_, static_cast<uint64_t>(args.seed)),
      model_(shape_, static_cast<uint64_t>(args.seed)) {
  if (a_.check) reference_ = std::make_unique<Mlp>(shape_, static_cast<uint64_t>(a_.seed));
  // A joiner takes the members' state first, as they do right after admitting it.
  if (pg_.config().host.getBool("group.join")) start_ = adoptFurthest(-1);
  rebuild();
}

bool Trainer::reporter() const { return pg_.globalRanks()[pg_.rank()] == 0; }

void Trainer::rebuild() {
  reducer_.reset();  // ends a failed iteration's span before the group changes under it
  ReducerOptions options;
  options.bucketCapBytes = mib(a_.bucketCapMb);
  options.firstBucketCapBytes = mib(a_.firstBucketCapMb);
  options.hook = makeCommHook(pg_, "gradient");
  reducer_ = std::make_unique<Reducer>(group_, paramInfos(model_), options);
  std::tie(begin_, end_) = shardRange(a_.batch, pg_.size(), pg_.rank());
  // Each rank's gradient is scaled by world/batch rather than 1/shard: the average the
  // hook takes over ranks is then the gradient of the global batch's mean loss even when
  // the shards differ in size by one.
  scale_ = static_cast<float>(pg_.size()) / static_cast<float>(a_.batch);
  members_ = pg_.globalRanks();
}

void Trainer::followGrowth(int64_t step) {
  if (pg_.globalRanks() == members_ || pg_.size() < static_cast<int>(members_.size())) return;
  const auto t = std::chrono::steady_clock::now();
  RecoveryRecord r;
  r.kind = "grow";
  r.failedStep = -1;
  r.worldBefore = static_cast<int>(members_.size());
  for (int g : pg_.globalRanks())
    if (std::find(members_.begin(), members_.end(), g) == members_.end()) r.joined.push_back(g);
  reducer_.reset();
  r.resumeStep = adoptFurthest(step);
  rebuild();
  r.world = pg_.size();
  r.generation = pg_.generation();
  r.recoverMs = ms(std::chrono::steady_clock::now() - t);
  if (reporter()) report_.recovery(r);
}

StepRecord Trainer::step(int64_t step, int epoch) {
  // Data loading is outside the timed step.
  const Batch shard = teacher_.batch(static_cast<uint64_t>(step), begin_, end_);
  const auto start = std::chrono::steady_clock::now();
  const uint64_t issuedBefore = pg_.bytesIssued();
  const double loss = model_.forward(shard);
  reducer_->prepareForBackward();
  model_.backward(shard, scale_, [&](size_t i) {
    const auto dims = model_.paramShape(i);
    reducer_->markReady(i, Tensor::fromBlob(model_.grad(i), Shape(dims.begin(), dims.end()), DType::Float32));
  });
  reducer_->finalize();
  model_.sgd(static_cast<float>(a_.lr));
  const auto stepTime = std::chrono::steady_clock::now() - start;
  StepRecord r = stepRecord(reducer_->stats());
  r.wireBytes = static_cast<int64_t>(pg_.bytesIssued() - issuedBefore);
  r.generation = pg_.generation();
  r.config = pg_.config().source;
  r.configLabel = configLabel(pg_.config());
  r.step = step;
  r.epoch = epoch;
  r.loss = loss;
  r.world = pg_.size();
  r.stepMs = ms(std::chrono::duration_cast<std::chrono::nanoseconds>(stepTime));
  r.endUnixMs = std::chrono::duration_cast<std::chrono::milliseconds>(
                    std::chrono::system_clock::now().time_since_epoch())
                    .count();
  return r;
}

int64_t Trainer::recover(const Error& error, int64_t step) {
  // A timeout too: a rank stopped past the heartbeat timeout sees its peers time out when
  // it resumes, and shrink() then tells it that it was removed.
  const bool peerTrouble = error.code() == ErrorCode::PeerLost || error.code() == ErrorCode::Aborted ||
                           error.code() == ErrorCode::Timeout;
  if (!elastic_ || !peerTrouble || ++failedRecoveries_ > kMaxRecoveriesWithoutProgress) return -1;
  const auto t = std::chrono::steady_clock::now();
  reducer_.reset();  // its buckets failed with the step: waits for none of them
  const ShrinkReport shrunk = shrinkAgain();
  const int64_t next = adoptFurthest(step);
  rebuild();
  RecoveryRecord r;
  r.kind = "shrink";
  r.failedStep = step;
  r.resumeStep = next;
  r.worldBefore = static_cast<int>(shrunk.oldRanks.size() + shrunk.removed.size());
  r.world = shrunk.worldSize;
  r.generation = shrunk.generation;
  r.removed = shrunk.removedGlobal;
  r.shrinkMs = ms(shrunk.total);
  r.recoverMs = ms(std::chrono::steady_clock::now() - t);
  r.error = error.what();
  if (reporter()) report_.recovery(r);
  return next;
}

// A member lost during the round fails it on every member, each of which then runs the
// next round, which agrees on who is left (process_group.h). A rank the round removed
// (Aborted), and a round still failing after a few tries, end the job as before. A round
// refused below supervisor.min_ranks is PeerLost too, so it is refused twice more (quick:
// the lost ranks are known) before the job ends with its message.
ShrinkReport Trainer::shrinkAgain() {
  for (int attempt = 1;; ++attempt) {
    try {
      return pg_.shrink();
    } catch (const Error& e) {
      const bool lostMeanwhile = e.code() == ErrorCode::PeerLost || e.code() == ErrorCode::Timeout;
      if (!lostMeanwhile || attempt >= kShrinkAttempts) throw;
      if (reporter()) {
        std::printf("shrink failed (%s); running the next membership round (%d of %d)\n", e.what(), attempt + 1,
                    kShrinkAttempts);
        std::fflush(stdout);
      }
    }
  }
}

// The member that completed the most steps broadcasts its parameters and step count: a
// rank that finished the failed step before it noticed the loss has applied the update
// the others have not.
int64_t Trainer::adoptFurthest(int64_t step) {
  const int64_t furthest = reduceOne(pg_, step, ReduceOp::Max);
  const int64_t source = reduceOne(pg_, step == furthest ? pg_.rank() : INT_MAX, ReduceOp::Min);
  BroadcastOptions o;
  o.root = static_cast<int>(source);
  for (size_t i = 0; i < model_.numParams(); ++i) {
    const auto dims = model_.paramShape(i);
    Tensor p = Tensor::fromBlob(model_.param(i), Shape(dims.begin(), dims.end()), DType::Float32);
    pg_.broadcast(p, o)->wait();
  }
  referenceUpTo(furthest);
  return furthest;
}

void Trainer::referenceUpTo(int64_t steps) {
  for (; reference_ && referenceSteps_ < steps; ++referenceSteps_) {
    const Batch global = teacher_.batch(static_cast<uint64_t>(referenceSteps_), 0, a_.batch);
    reference_->forward(global);
    reference_->backward(global, 1.0f / static_cast<float>(a_.batch));
    reference_->sgd(static_cast<float>(a_.lr));
  }
}

int Trainer::run() {
  // Every rank has the same parameters after each step, so the job's rank 0 alone evaluates.
  const Batch eval = reporter() ? teacher_.evalBatch(a_.evalBatch) : Batch{};
  const double initialLoss = reporter() ? model_.loss(eval) : 0.0;
  if (start_ == 0) report_.epoch(0, initialLoss);
  double finalLoss = initialLoss;
  const int64_t total = static_cast<int64_t>(a_.epochs) * a_.stepsPerEpoch;
  int epochsReported = static_cast<int>(start_ / a_.stepsPerEpoch);
  for (int64_t s = start_; s < total;) {
    const int epoch = static_cast<int>(s / a_.stepsPerEpoch) + 1;
    try {
      // A config published by `commhost run --watch` switches here, alike on every rank;
      // restarted ranks are admitted here.
      pg_.syncPoint();
      followGrowth(s);
      // --swap-every: between steps, when the Reducer has no bucket in flight. The hook
      // stays the one the job started with; the swap changes the backends and routes under it.
      if (swapper_) swapper_->beforeRun(pg_, s);
      report_.step(step(s, epoch));
    } catch (const Error& e) {
      const int64_t next = recover(e, s);
      if (next < 0) throw;
      s = next;
      continue;
    }
    failedRecoveries_ = 0;
    referenceUpTo(++s);
    // An epoch ends after its last step (a recovery may have skipped to a later one).
    for (; epochsReported < s / a_.stepsPerEpoch; ++epochsReported) {
      if (reporter()) finalLoss = model_.loss(eval);
      report_.epoch(epochsReported + 1, finalLoss);
    }
  }
  report_.summary();
  if (swapper_ && reporter()) swapper_->print(report_.text());
  // A shadowed route's tally, as bench prints it: did the candidate backend agree?
  if (reporter()) printShadows(report_.text(), pg_.shadowReport(std::chrono::seconds(30)));
  return reference_ ? check(total, initialLoss, finalLoss) : 0;
}

int Trainer::check(int64_t steps, double initialLoss, double finalLoss) {
  // Every rank compares its own parameters, so a rank that drifted from the others
  // fails too, not only rank 0.
  const Deviation d = maxDeviation(model_, *reference_);
  const auto dims = model_.paramShape(d.param);
  std::string where = model_.paramName(d.param) + " " + Shape(dims.begin(), dims.end()).str() + " element " +
                      std::to_string(d.element);
  if (dims.size() == 2)
    where += " (row " + std::to_string(d.element / dims[1]) + ", column " + std::to_string(d.element % dims[1]) + ")";
  char line[512];
  std::snprintf(line, sizeof line,
                "check: after %lld steps the largest parameter deviation from one process on the global batch is "
                "%.3g, at %s: %.9g here, %.9g in the reference",
                static_cast<long long>(steps), d.max, where.c_str(), d.a, d.b);
  int rc = 0;
  if (hook_.exact && !(d.max <= a_.tolerance)) {
    std::fprintf(stderr,
                 "commhost train: group %s, rank %d of %d: %s; above --tolerance %g although the hook, allreduce, "
                 "averages exactly: the averaged gradients were wrong. Try another backend for allreduce (--set "
                 "routes=...) to tell the backend from the hook\n",
                 pg_.name().c_str(), pg_.rank(), pg_.size(), line, a_.tolerance);
    rc = 1;
  } else if (reporter()) {
    std::fprintf(report_.text(), "%s (hook %s: %s)\n", line, hook_.name.c_str(),
                 hook_.exact ? "within --tolerance" : "lossy, so not an error");
  }
  if (reporter() && !(finalLoss < initialLoss)) {
    std::fprintf(stderr,
                 "commhost train: check: the held-out loss did not fall (%.6f before training, %.6f after %lld steps) "
                 "with hook %s; try a smaller --lr or the allreduce hook\n",
                 initialLoss, finalLoss, static_cast<long long>(steps), hook_.name.c_str());
    rc = 1;
  } else if (reporter()) {
    const Batch eval = teacher_.evalBatch(a_.evalBatch);
    std::fprintf(report_.text(),
                 "check: the held-out loss fell from %.6f to %.6f (one process on the global batch: %.6f)\n",
                 initialLoss, finalLoss, reference_->loss(eval));
  }
  std::fflush(report_.text());
  return rc;
}

}  // namespace commhost::cli::train
