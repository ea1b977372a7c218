// SPDX-License-Identifier: Apache-2.0
#include "report.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <utility>

#include "commhost/errors.h"

namespace commhost::cli::train {

namespace {
double ms(std::chrono::nanoseconds d) { return std::chrono::duration<double, std::milli>(d).count(); }
}  // namespace

StepRecord stepRecord(const ReducerStats& s) {
  StepRecord r;
  // The time during which some bucket was in flight (the union of the buckets'
  // [launch, done] intervals): summing their times would count buckets in flight
  // together twice, and the span from the first launch to the last completion would count
  // the backward between two launches as communication.
  std::vector<std::pair<std::chrono::nanoseconds, std::chrono::nanoseconds>> spans;
  for (size_t b = 0; b < s.launch.size() && b < s.comm.size(); ++b)
    spans.emplace_back(s.launch[b], s.launch[b] + s.comm[b]);
  std::sort(spans.begin(), spans.end());
  std::chrono::nanoseconds busy{0}, covered{std::chrono::nanoseconds::min()};
  for (const auto& [from, to] : spans) {
    const auto start = std::max(from, covered);
    if (to > start) busy += to - start;
    covered = std::max(covered, to);
  }
  r.commMs = ms(busy);
  r.backwardMs = ms(s.backward);
  r.waitMs = ms(s.finalizeWait);
  r.hidden = r.commMs > 0 ? std::min(1.0, std::max(0.0, 1.0 - r.waitMs / r.commMs)) : 0.0;
  r.bytes = s.bytes;
  r.buckets = s.buckets.size();
  return r;
}

TrainReport::TrainReport(bool leader, const std::string& jsonPath, int epochs, int stepsPerEpoch, bool append)
    : leader_(leader), bar_(leader && ::isatty(STDOUT_FILENO)), epochs_(epochs), stepsPerEpoch_(stepsPerEpoch) {
  if (!leader_ || jsonPath.empty()) return;
  if (jsonPath == "-") out_ = stderr;
  bar_ = bar_ && out_ == stdout;
  json_ = jsonPath == "-" ? stdout : std::fopen(jsonPath.c_str(), append ? "a" : "w");
  if (!json_)
    throw InvalidArgument("--json " + jsonPath + ": cannot write it (" + std::strerror(errno) +
                          "); give a writable file, or - for standard output");
}

TrainReport::~TrainReport() {
  if (json_ && json_ != stdout) std::fclose(json_);
}

void TrainReport::step(const StepRecord& r) {
  if (!leader_) return;
  (firstStep_.count ? laterSteps_ : firstStep_).add(r);
  if (stretches_.empty() || stretches_.back().generation != r.generation) {
    Stretch s;
    s.generation = r.generation;
    s.label = r.configLabel.empty() ? r.config : r.configLabel;
    s.world = r.world;
    s.fromStep = r.step;
    stretches_.push_back(std::move(s));
  }
  Stretch& s = stretches_.back();
  s.toStep = r.step;
  (s.first.count ? s.rest : s.first).add(r);
  epochLossSum_ += r.loss;
  ++epochSteps_;
  if (json_) {
    nlohmann::ordered_json j;
    j["step"] = r.step;
    j["epoch"] = r.epoch;
    j["loss"] = r.loss;
    j["step_ms"] = r.stepMs;
    j["backward_ms"] = r.backwardMs;
    j["comm_ms"] = r.commMs;
    j["wait_ms"] = r.waitMs;
    j["hidden"] = r.hidden;
    j["bytes"] = r.bytes;
    j["wire_bytes"] = r.wireBytes;
    j["buckets"] = r.buckets;
    j["generation"] = r.generation;
    j["config"] = r.config;
    j["world"] = r.world;
    j["end_unix_ms"] = r.endUnixMs;
    std::fprintf(json_, "%s\n", j.dump().c_str());
    std::fflush(json_);  // a rank killed (elastic jobs) keeps the rows it wrote
  }
  if (bar_) {
    constexpr int kWidth = 30;
    const int done = static_cast<int>(r.step % stepsPerEpoch_) + 1;
    const int filled = done * kWidth / stepsPerEpoch_;
    std::fprintf(out_, "\repoch %d/%d [%s%s] %d/%d loss %.4f", r.epoch, epochs_, std::string(filled, '#').c_str(),
                 std::string(kWidth - filled, '.').c_str(), done, stepsPerEpoch_, r.loss);
    std::fflush(out_);
  }
}

void TrainReport::recovery(const RecoveryRecord& r) {
  if (!leader_) return;
  recoveries_.push_back(r);
  if (bar_) std::fprintf(out_, "\r%70s\r", "");
  const auto list = [](const std::vector<int>& ranks) {
    std::string out;
    for (int g : ranks) out += (out.empty() ? "" : ", ") + std::to_string(g);
    return out;
  };
  if (r.kind == "grow")
    std::fprintf(out_, "grew from %d to %d ranks (joined %s) at generation %llu in %.1f ms; at step %lld\n",
                 r.worldBefore, r.world, list(r.joined).c_str(), static_cast<unsigned long long>(r.generation),
                 r.recoverMs, static_cast<long long>(r.resumeStep));
  else
    std::fprintf(out_,
                 "step %lld failed (%s); shrank from %d to %d ranks (removed %s) at generation %llu in %.1f ms, "
                 "recovered in %.1f ms; resuming at step %lld\n",
                 static_cast<long long>(r.failedStep), r.error.substr(0, 160).c_str(), r.worldBefore, r.world,
                 list(r.removed).c_str(), static_cast<unsigned long long>(r.generation), r.shrinkMs, r.recoverMs,
                 static_cast<long long>(r.resumeStep));
  std::fflush(out_);
  if (!json_) return;
  nlohmann::ordered_json j;
  j["event"] = r.kind;
  j["failed_step"] = r.failedStep;
  j["resume_step"] = r.resumeStep;
  j["world_before"] = r.worldBefore;
  j["world"] = r.world;
  j["generation"] = r.generation;
  j["removed"] = r.removed;
  j["joined"] = r.joined;
  j["shrink_ms"] = r.shrinkMs;
  j["recover_ms"] = r.recoverMs;
  j["error"] = r.error;
  std::fprintf(json_, "%s\n", j.dump().c_str());
  std::fflush(json_);
}

void TrainReport::epoch(int epoch, double evalLoss) {
  if (!leader_) return;
  if (bar_) std::fprintf(out_, "\r%70s\r", "");
  if (epoch == 0) {
    std::fprintf(out_, "epoch %d/%d  loss %.6f (held-out batch, before training)\n", epoch, epochs_, evalLoss);
  } else {
    std::fprintf(out_, "epoch %d/%d  loss %.6f (held-out batch)  train loss %.6f (rank 0's shard, epoch mean)\n", epoch,
                 epochs_, evalLoss, epochSteps_ ? epochLossSum_ / epochSteps_ : 0.0);
  }
  epochLossSum_ = 0;
  epochSteps_ = 0;
  std::fflush(out_);
}

void TrainReport::Sums::add(const StepRecord& r) {
  ++count;
  stepMs += r.stepMs;
  backwardMs += r.backwardMs;
  commMs += r.commMs;
  waitMs += r.waitMs;
  bytes += static_cast<double>(r.bytes);
  wireBytes += static_cast<double>(r.wireBytes);
  buckets += static_cast<double>(r.buckets);
}

void TrainReport::summary() {
  if (!leader_ || firstStep_.count == 0) return;
  // The first step is left out when there are others: its buckets are the initial
  // assignment, rebuilt after it, and its time includes first-touch allocations.
  const Sums& m = laterSteps_.count ? laterSteps_ : firstStep_;
  const size_t first = laterSteps_.count ? 1 : 0;
  const double n = static_cast<double>(m.count);
  const double hidden = m.commMs > 0 ? std::min(1.0, std::max(0.0, 1.0 - m.waitMs / m.commMs)) : 0.0;
  std::fprintf(
      out_,
      "time per step %.3f ms; %.0f bytes per step handed to the hook in %.1f buckets, %.0f sent by its "
      "collectives; %.0f%% of communication "
      "hidden behind backward (backward %.3f ms, communication %.3f ms, finalize waited %.3f ms per step); means "
      "over steps %zu..%zu of rank 0\n",
      m.stepMs / n, m.bytes / n, m.buckets / n, m.wireBytes / n, 100.0 * hidden, m.backwardMs / n, m.commMs / n,
      m.waitMs / n, first, firstStep_.count + laterSteps_.count - 1);
  generationSummary();
  std::fflush(out_);
}

void TrainReport::generationSummary() {
  // One line per stretch of steps on one config generation, when a hot swap made more
  // than one: the step time before and after each swap. A stretch's first step is left
  // out when it has others, as above (the new backends' first use: connections, first-touch).
  if (stretches_.size() < 2) return;
  for (const Stretch& s : stretches_) {
    const Sums& m = s.mean();
    const double n = static_cast<double>(m.count);
    std::fprintf(out_,
                 "generation %llu (%s): %d ranks, steps %lld..%lld, time per step %.3f ms, communication %.3f ms\n",
                 static_cast<unsigned long long>(s.generation), s.label.c_str(), s.world,
                 static_cast<long long>(s.fromStep), static_cast<long long>(s.toStep), m.stepMs / n, m.commMs / n);
  }
}

}  // namespace commhost::cli::train
