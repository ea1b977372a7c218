// SPDX-License-Identifier: Apache-2.0
// commhost train: data-parallel training of a small MLP (train/mlp.h) as a rank under the
// launcher, the gradients averaged through the Reducer and the configured comm hook
// (hooks.gradient). Each rank trains on its shard of every step's global batch; backward
// hands each layer's gradients to the Reducer as soon as they are computed, so the
// buckets of the last layers are on the wire while the first layers are still being
// differentiated. --check also trains the same model in this process on the whole
// global batch and compares.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>

#include "bench/report.h"
#include "bench/swap.h"
#include "commands.h"
#include "commhost/config.h"
#include "commhost/errors.h"
#include "commhost/process_group.h"
#include "commhost/reducer.h"
#include "commhost/registry.h"
#include "commhost/sdk/comm_hook.h"
#include "train/report.h"
#include "train/trainer.h"

namespace commhost::cli {
namespace {

using train::HookChoice;
using train::TrainArgs;

// Every argument is checked before the job is joined, so a typo fails at once on every
// rank instead of after the store started.
void checkArgs(const TrainArgs& a, int worldSize) {
  const auto atLeast = [](const char* flag, int64_t v, int64_t min, const char* example) {
    if (v < min)
      throw InvalidArgument(std::string(flag) + " " + std::to_string(v) + ": must be at least " + std::to_string(min) +
                            " (e.g. " + flag + " " + example + ")");
  };
  atLeast("--epochs", a.epochs, 1, "5");
  atLeast("--steps-per-epoch", a.stepsPerEpoch, 1, "20");
  atLeast("--hidden", a.hidden, 1, "256");
  atLeast("--layers", a.layers, 1, "4");
  atLeast("--eval-batch", a.evalBatch, 1, "1024");
  atLeast("--seed", a.seed, 0, "1");
  if (a.batch < worldSize)
    throw InvalidArgument("--batch " + std::to_string(a.batch) + ": the global batch is split over the job's " +
                          std::to_string(worldSize) + " ranks, so it needs at least one sample per rank; use --batch " +
                          std::to_string(std::max<int64_t>(worldSize, 256)));
  const auto positive = [](const char* flag, double v, const char* example) {
    if (!(v > 0) || !std::isfinite(v)) {
      char text[32];
      std::snprintf(text, sizeof text, "%g", v);
      throw InvalidArgument(std::string(flag) + " " + text + ": must be a number above 0 (e.g. " + flag + " " +
                            example + ")");
    }
  };
  positive("--lr", a.lr, "0.1");
  positive("--bucket-cap-mb", a.bucketCapMb, "25");
  positive("--first-bucket-cap-mb", a.firstBucketCapMb, "1");
  positive("--tolerance", a.tolerance, "1e-4");
  if (a.swapEvery < 0) throw InvalidArgument("--swap-every " + std::to_string(a.swapEvery) + ": want 1 or more");
  if (a.swapEvery > 0 && a.configs.empty())
    throw InvalidArgument("--swap-every needs --configs a.yaml,b.yaml: the configs to swap between");
  if (a.swapEvery == 0 && !a.configs.empty())
    throw InvalidArgument("--configs is what --swap-every N cycles through; give --swap-every too");
  if (a.hook.find_first_of(" {}[],:=") != std::string::npos)
    throw InvalidArgument("--hook '" + a.hook +
                          "': want a comm-hook plugin's name (e.g. --hook fp16_compress); set its options with "
                          "--set hooks.gradient.options.KEY=VALUE");
}

// The hook the config (with --hook and --set) names for the gradients.
HookChoice hookOf(const Config& config) {
  const auto it = config.hooks.find("gradient");
  if (it == config.hooks.end()) return {"allreduce (the default: the config has no hooks.gradient)", true};
  const PluginRef& ref = it->second;
  return {ref.plugin + (ref.wrap.empty() ? "" : " (wrap " + ref.wrap + ")"),
          ref.plugin == "allreduce" && ref.wrap.empty()};
}

int trainCommand(const TrainArgs& a) {
  const LaunchInfo launch = detectLaunch();
  checkArgs(a, launch.worldSize);
  // --hook first, so that --set can add the hook's options: --hook powersgd --set
  // hooks.gradient.options.rank=2.
  InitOptions init;
  init.configPath = launch.configPath;
  if (!a.hook.empty()) init.overrides.set.push_back("hooks.gradient={plugin: " + a.hook + "}");
  for (const auto& s : a.sets) init.overrides.set.push_back(s);
  // The config as init() will read it, checked now (an unknown hook plugin, a bad option)
  // before any store starts.
  PluginRegistry registry;
  const Config config = loadConfigOrDefault(init.configPath, registry, init.overrides);
  const HookChoice hook = hookOf(config);
  const bool leader = launch.rank == 0;
  if (leader) {
    std::FILE* out = a.jsonFile == "-" ? stderr : stdout;
    const int64_t samples = a.batch / launch.worldSize;
    std::fprintf(out, "# commhost train: %d ranks, config %s, hook %s\n", launch.worldSize, config.source.c_str(),
                 hook.name.c_str());
    std::fprintf(
        out,
        "# MLP %d layers of width %d (input 32, output 8), global batch %lld (%lld%s per rank), %d epochs of %d "
        "steps, lr %g, seed %llu, buckets %g MiB (first %g MiB)%s\n",
        a.layers, a.hidden, static_cast<long long>(a.batch), static_cast<long long>(samples),
        a.batch % launch.worldSize ? ("-" + std::to_string(samples + 1)).c_str() : "", a.epochs, a.stepsPerEpoch, a.lr,
        static_cast<unsigned long long>(a.seed), a.bucketCapMb, a.firstBucketCapMb, a.check ? ", checked" : "");
    std::fflush(out);
  }
  // Opens --json FILE, before the store; a restarted rank 0 (group.join) adds to it.
  train::TrainReport report(leader, a.jsonFile, a.epochs, a.stepsPerEpoch, config.host.getBool("group.join"));
  // The swap configs are loaded with the job's overrides (the hook among them), so a bad
  // file fails here, before the store starts, and every config keeps the job's hook.
  std::unique_ptr<Swapper> swapper;
  if (a.swapEvery > 0) swapper = std::make_unique<Swapper>(loadSwapConfigs(a.configs, init.overrides.set), a.swapEvery);
  auto pg = commhost::init(init);
  try {
    return train::Trainer(a, hook, report, pg, swapper.get()).run();
  } catch (const Error& e) {
    // Report before the group is torn down (see bench: a store-serving rank may be
    // stopped by the launcher while it lingers for its peers).
    std::fprintf(stderr, "commhost: %s\n", e.what());
    std::fflush(stderr);
    return 1;
  }
}

}  // namespace

void addTrainCommand(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "train", "Data-parallel training of a small MLP through the Reducer and the configured comm hook");
  static TrainArgs a;
  cmd->add_option("--epochs", a.epochs, "Epochs (a loss line after each)")->capture_default_str();
  cmd->add_option("--steps-per-epoch", a.stepsPerEpoch, "Steps per epoch, each on a new global batch")
      ->capture_default_str();
  cmd->add_option("--batch", a.batch, "Global batch: samples per step, split over the ranks")->capture_default_str();
  cmd->add_option("--hidden", a.hidden, "Width of the hidden layers")->capture_default_str();
  cmd->add_option("--layers", a.layers, "Linear layers (tanh between them)")->capture_default_str();
  cmd->add_option("--lr", a.lr, "SGD learning rate")->capture_default_str();
  cmd->add_option("--seed", a.seed, "Seed of the model, the teacher and the data (the same on every rank)")
      ->capture_default_str();
  cmd->add_option("--bucket-cap-mb", a.bucketCapMb, "Reducer bucket cap in MiB (c10d's bucket_cap_mb)")
      ->capture_default_str();
  cmd->add_option("--first-bucket-cap-mb", a.firstBucketCapMb, "Cap of the first bucket in MiB")->capture_default_str();
  cmd->add_flag("--check", a.check,
                "Also train in one process on the global batch and compare: parameters within --tolerance with "
                "the allreduce hook, and the loss falling with any hook");
  cmd->add_option("--tolerance", a.tolerance, "Largest parameter deviation --check accepts with the allreduce hook")
      ->capture_default_str();
  cmd->add_option("--eval-batch", a.evalBatch, "Samples of the held-out batch the epoch loss is measured on")
      ->capture_default_str();
  cmd->add_option("--hook", a.hook,
                  "Comm-hook plugin for the gradients: hooks.gradient becomes {plugin: NAME} (then --set lines "
                  "apply)")
      ->type_name("NAME");
  cmd->add_option("--set", a.sets, "Override a config key: --set hooks.gradient.options.rank=2 (repeatable)")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd->add_option("--json", a.jsonFile, "Also write one JSON object per step to FILE (rank 0; - for standard output)")
      ->type_name("FILE");
  cmd->add_option("--swap-every", a.swapEvery,
                  "Hot swap (ProcessGroup::reconfigure) every N steps, between steps, cycling through --configs; "
                  "prints the step time per config generation and each swap's phase times")
      ->type_name("N");
  cmd->add_option("--configs", a.configs, "The configs --swap-every cycles through: a.yaml,b.yaml")->type_name("FILES");
  cmd->footer(
      "Examples (run it under the launcher):\n"
      "  commhost run -n 4 -c configs/gloo.yaml -- commhost train\n"
      "  commhost run -n 2 -c configs/shm.yaml -- commhost train --check --epochs 2\n"
      "  commhost run -n 4 -c configs/shm.yaml -- commhost train --hook fp16_compress --check\n"
      "  commhost run -n 4 -c configs/gloo.yaml -- commhost train --hook powersgd --set "
      "hooks.gradient.options.rank=2 --json steps.jsonl\n"
      "  commhost run -n 4 -c configs/gloo.yaml -- commhost train --swap-every 50 --configs "
      "configs/gloo.yaml,configs/shm.yaml");
  cmd->callback([] {
    const int rc = trainCommand(a);
    if (rc) throw CLI::RuntimeError(rc);
  });
}

}  // namespace commhost::cli
