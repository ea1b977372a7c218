// SPDX-License-Identifier: Apache-2.0
// commhost tune: under any launcher, like bench. Measures, in the job itself, every
// backend of the config that can serve each op asked for, at every size, in alternating
// rounds (the candidates' order rotates each round), with bench's statistics and its
// check on every cell; then rank 0 writes a config whose routes send each size range to
// the fastest backend that was right, with the measured table as a comment.
//
// The candidates stay built for the whole run: the group swaps (hot swap) between
// configs that list every candidate on the op's route and differ only in which comes
// first, so a swap changes where the op goes and rebuilds nothing (tuned_routes.h).
#include <filesystem>
#include <fstream>
#include <sstream>

#include "../bench/bench_memory.h"
#include "../bench/bench_ops.h"
#include "../bench/measure.h"
#include "../commands.h"
#include "commhost/errors.h"
#include "commhost/process_group.h"
#include "commhost/registry.h"
#include "tuned_routes.h"

namespace commhost::cli {
namespace {

struct TuneArgs {
  std::string ops = "allreduce";
  std::string sizes = "8:64M";
  std::string backends;  // empty: every backend of the config
  std::string out;
  std::string table;  // `--table`: the measurements for the `measured` tuner
  int repeat = 3;
  double minTime = 0.05;
  std::string dtype = "f32";
  std::string redop = "sum";
};

std::vector<std::string> splitList(const std::string& list) {
  std::vector<std::string> out;
  std::stringstream in(list);
  for (std::string item; std::getline(in, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

// The config the ranks run, as text (its file, or the embedded default), and its folder.
struct ConfigSource {
  std::string text, dir, name;
};
ConfigSource configSource(const std::string& configPath) {
  if (configPath.empty()) return {defaultConfigText(), "", "the default config"};
  const std::string path = resolveConfigPath(configPath);
  std::ifstream in(path);
  if (!in) throw InvalidArgument("commhost tune: cannot read the config " + path);
  std::stringstream text;
  text << in.rdbuf();
  return {text.str(), std::filesystem::path(path).parent_path().string(), path};
}

// The ops to tune: a comma list of bench ops, or "all" (every bench op with a size).
std::vector<std::string> tunedOps(const std::string& list) {
  std::vector<std::string> out;
  for (const auto& op : list == "all" ? benchOpNames() : splitList(list)) {
    requireBenchOp(op);
    if (op == "barrier") {
      if (list == "all") continue;
      throw InvalidArgument("commhost tune --op barrier: a barrier has no size to tune; its route stays the config's");
    }
    out.push_back(op);
  }
  return out;
}

// One op's candidates: the config for each (which swaps to it), and those skipped.
struct OpPlan {
  std::string op;
  std::vector<OpType> routed;
  std::vector<std::string> candidates;
  std::vector<std::shared_ptr<const Config>> configs;  // by candidate
  std::vector<std::string> skipped;
};

OpPlan planOp(const std::string& op, const ConfigSource& source, const std::vector<std::string>& backends) {
  OpPlan p{op, benchOpTypes(op), {}, {}, {}};
  PluginRegistry registry;  // validates only: the group swaps through its own
  for (const auto& b : backends) {
    try {
      loadConfigText(candidateConfigText(source.text, source.dir, DeviceType::CPU, p.routed, {b}, b),
                     "tune candidate " + b, registry);
      p.candidates.push_back(b);
    } catch (const Error& e) {
      p.skipped.push_back(b + ": " + e.what());
    }
  }
  if (p.candidates.empty())
    throw InvalidArgument("commhost tune: no backend of " + source.name + " can serve " + op + " on cpu (" +
                          std::to_string(p.skipped.size()) + " tried; the first: " +
                          (p.skipped.empty() ? std::string("none listed") : p.skipped.front()) + ")");
  for (const auto& c : p.candidates)
    p.configs.push_back(std::make_shared<Config>(
        loadConfigText(candidateConfigText(source.text, source.dir, DeviceType::CPU, p.routed, p.candidates, c),
                       source.name + " (tune: " + op + " on " + c + ")", registry)));
  return p;
}

// Every candidate at every size, `repeat` rounds, the first candidate of a round one
// further along each time.
OpTimes measureOp(const OpPlan& p, const BenchPlan& plan, ProcessGroup& pg, BenchMemory& memory, StoreRounds& rounds) {
  OpTimes t{p.op, p.routed, {}, p.skipped};
  auto op = makeBenchOp(p.op, pg, plan.params, memory);
  // Ranges are in the bytes the dispatcher routes by: one rank's block for the ops that
  // split their message (tensors are allocated here, outside any timing). Sizes that
  // round to the same routed bytes are measured once.
  std::vector<int64_t> sizes;
  for (int64_t bytes : plan.sizes) {
    op->prepare(bytes);
    if (!t.sizes.empty() && op->routedBytes() <= t.sizes.back().bytes) continue;
    sizes.push_back(bytes);
    t.sizes.push_back({op->routedBytes(), {}});
    for (const auto& c : p.candidates) t.sizes.back().candidates.push_back({c, {}, 0});
  }
  Injector none({});
  MeasureContext ctx{plan, pg, memory, none, nullptr, rounds, false};
  const size_t n = p.candidates.size();
  for (int round = 0; round < plan.repeat; ++round) {
    for (size_t k = 0; k < n; ++k) {
      const size_t c = (k + static_cast<size_t>(round)) % n;
      pg.reconfigure(p.configs[c]);
      // A backend's first runs after a pause are slow (bench's --settle): each candidate
      // settles again after every swap, not only the first.
      ctx.settled = false;
      for (size_t i = 0; i < sizes.size(); ++i) {
        const std::string what = p.op + " on " + p.candidates[c] + " at " + std::to_string(sizes[i]) +
                                 " bytes (round " + std::to_string(round + 1) + ")";
        const Measurement m = measureCell(ctx, *op, sizes[i], what);
        t.sizes[i].candidates[c].roundUs.push_back(m.timeUs);
        t.sizes[i].candidates[c].wrong += std::max<int64_t>(0, m.wrong);
      }
    }
  }
  return t;
}

BenchPlan benchPlanFor(const TuneArgs& a, const std::string& op, int worldSize) {
  BenchArgs b;
  b.op = op;
  b.sizes = a.sizes;
  b.dtype = a.dtype;
  b.redop = a.redop;
  b.minTime = a.minTime;
  b.minTimeGiven = true;
  b.check = true;  // a backend is chosen only where it was right
  BenchPlan plan = planBench(b, worldSize);
  plan.repeat = a.repeat;
  return plan;
}

int tune(const TuneArgs& a) {
  const LaunchInfo launch = detectLaunch();
  if (a.repeat < 1) throw InvalidArgument("commhost tune --repeat " + std::to_string(a.repeat) + ": give 1 or more");
  if (a.out.empty() && a.table.empty())
    throw InvalidArgument(
        "commhost tune: give -o FILE (a tuned config), --table FILE (the measurements, for the "
        "`measured` tuner), or both");
  const ConfigSource source = configSource(launch.configPath);
  std::vector<std::string> backends = splitList(a.backends);
  if (backends.empty()) {
    PluginRegistry registry;
    for (const auto& [name, ref] : loadConfigOrDefault(launch.configPath, registry).backends) backends.push_back(name);
  }
  std::vector<OpPlan> plans;
  std::vector<BenchPlan> benchPlans;
  for (const auto& op : tunedOps(a.ops)) {
    plans.push_back(planOp(op, source, backends));
    benchPlans.push_back(benchPlanFor(a, op, launch.worldSize));
  }
  InitOptions init;
  init.configPath = launch.configPath;
  auto pg = commhost::init(init);
  auto memory = cpuMemory();
  std::vector<OpTimes> results;
  StoreRounds rounds(*pg);  // one for the run: each op's cells continue its numbering
  for (size_t i = 0; i < plans.size(); ++i) results.push_back(measureOp(plans[i], benchPlans[i], *pg, *memory, rounds));
  if (pg->rank() != 0) return 0;
  char summary[160];
  std::snprintf(summary, sizeof summary, "%d ranks, %s %s, %d alternating rounds of at least %g s per backend and size",
                pg->size(), a.dtype.c_str(), a.redop.c_str(), a.repeat, a.minTime);
  const std::vector<std::string> header = {"commhost tune: " + std::string(summary) + ", from " + source.name,
                                           "(`commhost config check` on this file prints the route table)"};
  for (const auto& r : results)
    for (const auto& line : timesTable(r)) std::printf("#%s\n", line.c_str());
  if (!a.out.empty()) {
    const std::string tuned = tunedConfigText(source.text, source.dir, DeviceType::CPU, results, header);
    PluginRegistry registry;
    loadConfigText(tuned, a.out, registry);  // what was written loads: a bug here is said, not written
    std::ofstream out(a.out);
    if (!(out << tuned)) throw InvalidArgument("commhost tune -o " + a.out + ": cannot write it");
    std::printf("commhost tune: wrote %s\n", a.out.c_str());
  }
  if (!a.table.empty()) {
    const MeasuredTable table = measuredTable(results, pg->size(), DeviceType::CPU, parseDType(a.dtype),
                                              parseReduceOp(a.redop));
    const std::string text = table.toJson();
    parseMeasuredTable(text, a.table);  // what is written reads back, as above
    std::ofstream out(a.table);
    if (!(out << text)) throw InvalidArgument("commhost tune --table " + a.table + ": cannot write it");
    std::printf("commhost tune: wrote %s (for `tuner: { plugin: measured, options: { table: %s } }`)\n",
                a.table.c_str(), a.table.c_str());
  }
  return 0;
}

}  // namespace

void addTuneCommand(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "tune",
      "Measure every backend of the config on each op and size in this job, and write a config routing each "
      "size to the fastest one that was right");
  static TuneArgs a;
  cmd->add_option("--op", a.ops, "A bench op (not barrier), a comma list of them, or all")->capture_default_str();
  cmd->add_option("--sizes", a.sizes, "MIN:MAX message sizes (doubling), or a list: 8,64K,1M")->capture_default_str();
  cmd->add_option("--backends", a.backends, "The candidates, a comma list (default: every backend of the config)");
  cmd->add_option("-o,--output", a.out, "The tuned config to write (rank 0)");
  cmd->add_option("--table", a.table,
                  "The measured table to write (rank 0), for `tuner: { plugin: measured, options: { table: FILE } }`");
  cmd->add_option("--repeat", a.repeat, "Alternating rounds: each candidate measured this many times per size")
      ->capture_default_str();
  cmd->add_option("--min-time", a.minTime, "Seconds each candidate spends on each size per round, at least")
      ->capture_default_str();
  cmd->add_option("--dtype", a.dtype, "Element type")->capture_default_str();
  cmd->add_option("--redop", a.redop, "Reduce op")->capture_default_str();
  cmd->footer(
      "Example:\n"
      "  commhost run -n 4 -c both.yaml -- commhost tune --op allreduce -o tuned.yaml\n"
      "  commhost config check tuned.yaml     the routes it chose, per size range\n"
      "  commhost run -n 4 -c both.yaml -- commhost tune --op all --table measured.json\n"
      "                                       the figures, for the `measured` tuner plugin");
  cmd->callback([] {
    const int rc = tune(a);
    if (rc) throw CLI::RuntimeError(rc);
  });
}

}  // namespace commhost::cli
