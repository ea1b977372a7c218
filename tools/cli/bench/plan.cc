// SPDX-License-Identifier: Apache-2.0
#include "plan.h"

#include <algorithm>
#include <map>

#include "bench_memory.h"
#include "commhost/dispatcher.h"
#include "commhost/errors.h"
#include "commhost/registry.h"

namespace commhost::cli {
namespace {

// A size the user wrote must be a whole number of elements: `--sizes 6` with f32 would
// otherwise run 4 bytes and print 4 in a table the user reads as 6. Sizes the sweep
// computes (--factor 1.5) are rounded down to whole elements instead.
int64_t wholeElements(const std::string& flag, const std::string& dtype, const std::string& text, int64_t elem) {
  int64_t s = 0;
  try {
    s = parseSize(text);
  } catch (const Error& e) {
    throw InvalidArgument(flag + ": " + e.what());
  }
  if (s > 0 && s % elem != 0) {
    const int64_t below = std::max(elem, s / elem * elem), above = (s / elem + 1) * elem;
    throw InvalidArgument(flag + ": " + text + " is not a whole number of " + dtype + " elements (" +
                          std::to_string(elem) + " bytes each); use " + std::to_string(below) +
                          (below == above ? "" : " or " + std::to_string(above)));
  }
  return s;
}

std::vector<int64_t> sweep(const BenchArgs& a, int64_t elem) {
  const std::string flag = "--sizes " + a.sizes;
  if (a.sizes.find(',') != std::string::npos) {  // an explicit list: 8,64K,1M
    std::vector<int64_t> out;
    for (size_t at = 0; at <= a.sizes.size();) {
      const size_t comma = std::min(a.sizes.find(',', at), a.sizes.size());
      const int64_t s = wholeElements(flag, a.dtype, a.sizes.substr(at, comma - at), elem);
      if (s <= 0) throw InvalidArgument(flag + ": every size must be above 0");
      out.push_back(s);
      at = comma + 1;
    }
    return out;
  }
  const size_t colon = a.sizes.find(':');
  int64_t lo = a.minBytes.empty() ? wholeElements(flag, a.dtype, a.sizes.substr(0, colon), elem)
                                  : wholeElements("-b " + a.minBytes, a.dtype, a.minBytes, elem);
  int64_t hi = !a.maxBytes.empty()          ? wholeElements("-e " + a.maxBytes, a.dtype, a.maxBytes, elem)
               : colon == std::string::npos ? lo
                                            : wholeElements(flag, a.dtype, a.sizes.substr(colon + 1), elem);
  if (!a.minBytes.empty() && a.maxBytes.empty() && !a.sizesGiven) hi = std::max(hi, lo);
  if (lo <= 0 || hi < lo) {
    if (!a.minBytes.empty() || !a.maxBytes.empty())
      throw InvalidArgument("-b " + std::to_string(lo) + " -e " + std::to_string(hi) +
                            ": want 0 < MIN <= MAX, e.g. -b 8 -e 64M");
    throw InvalidArgument(flag + ": want MIN:MAX with 0 < MIN <= MAX, e.g. 8:64M");
  }
  int64_t step = 0;
  if (!a.step.empty()) {
    try {
      step = parseSize(a.step);
    } catch (const Error& e) {
      throw InvalidArgument(std::string("--step: ") + e.what());
    }
    if (step <= 0) throw InvalidArgument("--step " + a.step + ": must be above 0");
  }
  if (step <= 0 && a.factor <= 1) throw InvalidArgument("--factor (-f) must be above 1 (or give --step)");
  std::vector<int64_t> out;
  for (int64_t s = lo; s <= hi;) {
    out.push_back(s);
    int64_t next = step > 0 ? s + step : static_cast<int64_t>(static_cast<double>(s) * a.factor);
    next = next / elem * elem;
    s = next > s ? next : s + elem;
  }
  return out;
}

void refuseBoth(bool first, const std::string& a, bool second, const std::string& b, const std::string& fix) {
  if (first && second) throw InvalidArgument(a + " and " + b + " conflict; " + fix);
}

// Routes as YAML flow text, for the --set line init() applies like any other.
// (RouteSpec's fields as of this writing: device, op, min/max bytes, backend.)
std::string routeYaml(const RouteSpec& r) {
  std::string out = "{ ";
  if (r.device) out += std::string("device: ") + deviceTypeName(*r.device) + ", ";
  if (r.op) out += std::string("op: ") + opName(*r.op) + ", ";
  if (r.dtype) out += std::string("dtype: ") + dtypeName(*r.dtype) + ", ";
  if (r.reduceOp) out += std::string("reduce_op: ") + reduceOpName(*r.reduceOp) + ", ";
  if (r.minBytes) out += "min_bytes: " + std::to_string(r.minBytes) + ", ";
  if (r.maxBytes != INT64_MAX) out += "max_bytes: " + std::to_string(r.maxBytes) + ", ";
  if (r.fallback.empty()) return out + "backend: " + r.backend + " }";
  std::string list;
  for (const auto& b : r.backends()) list += (list.empty() ? "" : ", ") + b;
  return out + "backend: [" + list + "] }";
}

// The device an op of the bench is routed by: its tensors', but a barrier (no tensors)
// goes where ProcessGroup::barrier sends it, cpu whenever some route serves cpu.
DeviceType deviceOf(const RouteTable& table, OpType t, const BenchParams& params) {
  if (t == OpType::Barrier) return table.servesDevice(DeviceType::CPU) ? DeviceType::CPU : DeviceType::CUDA;
  return params.device;
}

// "gloo", or "shm up to 1MiB, gloo above 1MiB" when the route depends on the size.
// Routes may depend on dtype and reduce op too: the cells of the bench's own dtype and op.
std::string describeRoute(const RouteTable& table, const std::vector<OpType>& types, const BenchParams& params) {
  std::vector<std::string> each;
  for (OpType t : types) {
    std::string one;
    const auto& segments = table.segments(t, deviceOf(table, t, params), params.dtype, params.reduceOp.kind);
    for (const auto& s : segments) {
      std::string range;
      if (segments.size() > 1)
        range = s.minBytes == 0           ? " up to " + formatSize(s.maxBytes)
                : s.maxBytes == INT64_MAX ? " above " + formatSize(s.minBytes - 1)
                                          : " for " + formatSize(s.minBytes) + ".." + formatSize(s.maxBytes);
      one += (one.empty() ? "" : ", ") + (s.backend < 0 ? std::string("unserved") : table.backendNames()[s.backend]) +
             range;
    }
    each.push_back(one.empty() ? "no route" : one);
  }
  if (std::all_of(each.begin(), each.end(), [&](const std::string& e) { return e == each[0]; })) return each[0];
  std::string out;  // sendrecv whose send and recv go different ways
  for (size_t i = 0; i < types.size(); ++i) out += (i ? "; " : "") + std::string(opName(types[i])) + " " + each[i];
  return out;
}

}  // namespace

BenchPlan planBench(const BenchArgs& a, int worldSize) {
  BenchPlan plan;
  refuseBoth(a.inPlace, "--inplace", a.outOfPlace, "--out-of-place", "give one (in-place is the default)");
  refuseBoth(a.sideBySide, "--side-by-side", a.inPlace || a.outOfPlace, a.inPlace ? "--inplace" : "--out-of-place",
             "--side-by-side measures both");
  refuseBoth(a.sizesGiven, "--sizes", !a.minBytes.empty() || !a.maxBytes.empty(), a.minBytes.empty() ? "-e" : "-b",
             "give --sizes MIN:MAX or -b MIN -e MAX");
  refuseBoth(a.factorGiven, "--factor (-f)", a.stepGiven, "--step (-i)", "a sweep multiplies or adds, not both");
  if (a.swapEvery < 0) throw InvalidArgument("--swap-every " + std::to_string(a.swapEvery) + ": want 1 or more");
  if (a.swapEvery > 0 && a.configs.empty())
    throw InvalidArgument("--swap-every needs --configs a.yaml,b.yaml: the configs to swap between");
  if (a.swapEvery == 0 && !a.configs.empty())
    throw InvalidArgument("--configs is what --swap-every N cycles through; give --swap-every too");
  refuseBoth(a.swapEvery > 0, "--swap-every", !a.backend.empty(), "--backend",
             "--backend rewrites the job's routes, which a swap replaces; name the backends in the --configs files");
  // -c is nccl-tests' check here, not a config as for `commhost run -c`: say so.
  if (!a.checkLevel.empty() && a.checkLevel != "0" && a.checkLevel != "1")
    throw InvalidArgument("-c " + a.checkLevel +
                          ": want -c 0 (no check) or -c 1 (check), as nccl-tests; a config goes to `commhost run -c "
                          "FILE` or COMMHOST_CONFIG");
  refuseBoth(a.check, "--check", a.checkLevel == "0", "-c 0", "give one of them");
  plan.check = a.check || a.checkLevel == "1";

  if (a.op != "all") requireBenchOp(a.op);
  plan.ops = a.op == "all" ? benchOpNames() : std::vector<std::string>{a.op};
  BenchParams& p = plan.params;
  p.device = parseBenchDevice(a.device);
  try {
    p.dtype = parseDType(a.dtype);
    p.reduceOp = ReduceOp(parseReduceOp(a.redop));
  } catch (const Error& e) {
    throw InvalidArgument(std::string("--dtype ") + a.dtype + " --redop " + a.redop + ": " + e.what());
  }
  if (p.dtype == DType::Bool) throw InvalidArgument("--dtype bool is not measured; use u8 or an integer type");
  const bool reduces = std::any_of(plan.ops.begin(), plan.ops.end(), benchOpUsesReduceOp);
  if (reduces && p.reduceOp.isBitwise() && isFloating(p.dtype))
    throw InvalidArgument("--redop " + a.redop + " needs an integer --dtype, not " + a.dtype + "; e.g. --dtype i32");
  if (reduces && (p.reduceOp.kind == ReduceOp::Avg || p.reduceOp.kind == ReduceOp::PreMulSum) && !isFloating(p.dtype))
    throw InvalidArgument("--redop " + a.redop + " needs a floating-point --dtype, not " + a.dtype + "; e.g. f32");
  if (a.root < 0 || a.root >= worldSize)
    throw InvalidArgument("--root " + std::to_string(a.root) + " is outside the job's " + std::to_string(worldSize) +
                          " ranks; use 0.." + std::to_string(worldSize - 1));
  p.root = a.root;
  if (a.iters < 1) throw InvalidArgument("--iters (-n) " + std::to_string(a.iters) + ": must be >= 1");
  if (a.warmup < 0) throw InvalidArgument("--warmup (-w) " + std::to_string(a.warmup) + ": must be >= 0");
  if (a.repeat < 1 || a.repeat > 100)
    throw InvalidArgument("--repeat " + std::to_string(a.repeat) + ": want 1 to 100 rounds per size");
  if (!(a.minTime >= 0 && a.minTime <= 3600))
    throw InvalidArgument("--min-time " + std::to_string(a.minTime) + ": want 0 to 3600 seconds per size");
  plan.iters = a.iters;
  plan.warmup = a.warmup;
  plan.repeat = a.repeat;
  plan.minTimeS = a.minTime;
  if (a.timing != "each" && a.timing != "loop")
    throw InvalidArgument("--timing " + a.timing + ": want each (a clock read per iteration) or loop (one per loop)");
  plan.timeEach = a.timing == "each";
  if (!(a.settle >= 0 && a.settle <= 3600))
    throw InvalidArgument("--settle " + std::to_string(a.settle) + ": want 0 to 3600 seconds");
  // While swapping, the count stays --iters unless --min-time asks otherwise: the warmup
  // does not see the swaps' cost, and a count from time would mean hundreds of swaps.
  plan.fixedIters = (a.itersGiven || a.swapEvery > 0) && !a.minTimeGiven;
  plan.sizes = sweep(a, static_cast<int64_t>(elementSize(p.dtype)));
  plan.placements = a.sideBySide ? std::vector<bool>{false, true} : std::vector<bool>{!a.outOfPlace};
  for (const auto& spec : a.injections) plan.injections.push_back(parseInjection(spec));
  // Swaps and injections happen at counted runs of the op: settling would shift them.
  plan.settleS = a.swapEvery > 0 || !plan.injections.empty() ? 0 : a.settle;
  return plan;
}

namespace {

// --backend: the named backend must be configured and serve the bench's device and dtype;
// the selected ops it does not serve move to plan.skipped (all of them: an error).
void keepOpsServedBy(const BenchArgs& a, const Config& config, const PluginRegistry& registry, BenchPlan& plan) {
  if (!config.backends.count(a.backend)) {
    std::vector<std::string> names;
    std::string list;
    for (const auto& [name, ref] : config.backends) {
      names.push_back(name);
      list += (list.empty() ? "" : ", ") + name;
    }
    const std::string hint = closestMatch(a.backend, names);
    throw InvalidArgument("--backend " + a.backend + ": no such backend in " + config.source +
                          (hint.empty() ? "" : " (did you mean '" + hint + "'?)") + "; configured: " + list +
                          ". Add it under backends: or name one of these");
  }
  // The manifest routes are checked against; a plugin that did not load is taken to
  // serve everything, as the route table does, and fails when used.
  Capabilities caps{
      Capabilities::allOps(), Capabilities::allDTypes(), Capabilities::allReduceOps(), {DeviceType::CPU}, {}};
  const PluginEntry* entry = registry.find(config.backends.at(a.backend).plugin);
  if (entry && entry->descriptor) caps = entry->descriptor->capabilities;
  const std::string who = "--backend " + a.backend + " (plugin " + config.backends.at(a.backend).plugin + ")";
  const DeviceType device = plan.params.device;
  if (!caps.devices.has(device))
    throw InvalidArgument(
        who + " does not serve " + deviceTypeName(device) + " tensors, which the bench measures; it serves " +
        listNames(caps.devices, kNumDeviceTypes, deviceTypeName) + " (the bench measures what --device names)");
  if (!caps.dtypes.has(plan.params.dtype))
    throw InvalidArgument(who + " does not serve dtype " + a.dtype +
                          "; give --dtype one of: " + listNames(caps.dtypes, kNumDTypes, dtypeName));
  std::vector<std::string> kept;
  for (const auto& op : plan.ops) {
    std::string why;
    for (OpType t : benchOpTypes(op))
      if (!caps.ops.has(t)) why += (why.empty() ? "does not serve " : ", ") + std::string(opName(t));
    if (why.empty() && benchOpUsesReduceOp(op) && !caps.reduceOps.has(plan.params.reduceOp.kind))
      why = std::string("does not serve reduce op ") + reduceOpName(plan.params.reduceOp.kind);
    if (why.empty()) kept.push_back(op);
    else plan.skipped.emplace_back(op, why);
  }
  if (kept.empty())
    throw InvalidArgument(who + " serves none of the selected ops (" + plan.skipped.front().second +
                          (plan.skipped.size() > 1 ? ", ..." : "") + "); it serves ops " +
                          listNames(caps.ops, kNumOpTypes, opName) + " with reduce ops " +
                          listNames(caps.reduceOps, ReduceOp::kNumKinds, reduceOpName));
  plan.ops = kept;
}

// The config's routes with the ops under test moved to `backend`: their routes on the
// bench's device are replaced by one naming op and device (which beats any route naming
// fewer); every other route (and so every other op, and these ops on other devices)
// stays as configured.
std::vector<RouteSpec> routesMovedTo(const std::string& backend, const Config& config, const BenchPlan& plan) {
  const DeviceType device = plan.params.device;
  std::vector<OpType> moved;
  for (const auto& op : plan.ops)
    for (OpType t : benchOpTypes(op)) moved.push_back(t);
  std::vector<RouteSpec> routes;
  for (const auto& r : config.routes)
    if (!r.op || r.device != device || std::find(moved.begin(), moved.end(), *r.op) == moved.end()) routes.push_back(r);
  for (OpType t : moved) {
    // Naming every key the bench's cells have (dtype, reduce op) too: no kept route
    // (one without a device, say) can be more specific and win the measured cell.
    RouteSpec r;
    r.device = device;
    r.op = t;
    if (carriesData(t)) r.dtype = plan.params.dtype;
    if (isReduction(t)) r.reduceOp = plan.params.reduceOp.kind;
    r.backend = backend;
    routes.push_back(r);
  }
  return routes;
}

// A cell no route serves (the bench's dtype or reduce op is one no listed backend has)
// is refused now, naming the cell, rather than failing on its first call.
void refuseUnservedCells(const RouteTable& table, const BenchPlan& plan, const std::string& source) {
  const auto [lo, hi] = std::minmax_element(plan.sizes.begin(), plan.sizes.end());
  if (lo == plan.sizes.end()) return;
  for (const auto& op : plan.ops)
    for (OpType t : benchOpTypes(op))
      for (const auto& seg :
           table.segments(t, deviceOf(table, t, plan.params), plan.params.dtype, plan.params.reduceOp.kind))
        if (seg.backend < 0 && seg.maxBytes >= *lo && seg.minBytes <= *hi)
          throw InvalidArgument("bench --op " + op + ": " +
                                table.whyUnserved(t, deviceOf(table, t, plan.params), std::max(seg.minBytes, *lo),
                                                  plan.params.dtype, plan.params.reduceOp.kind) +
                                "; add such a route to " + source + ", or pick another --dtype/--redop/--device");
}

}  // namespace

void resolveRoutes(const BenchArgs& a, const LaunchInfo& launch, BenchPlan& plan) {
  const std::string& configPath = launch.configPath;
  PluginRegistry registry;
  ConfigOverrides overrides;
  overrides.set = a.sets;
  const auto load = [&] { return loadConfigOrDefault(configPath, registry, overrides); };
  Config config = load();
  plan.configSource = config.source;
  plan.sets = a.sets;
  if (!a.backend.empty()) {
    keepOpsServedBy(a, config, registry, plan);
    std::string text;
    for (const auto& r : routesMovedTo(a.backend, config, plan)) text += (text.empty() ? "" : ", ") + routeYaml(r);
    plan.sets.push_back("routes=[" + text + "]");
    overrides.set = plan.sets;
    config = load();  // validates the new routes now, before any store
  }
  const RouteTable table = RouteTable::forGroup(
      config, registry, {config.groupName(), launch.rank, launch.worldSize, launch.localWorldSize});
  refuseUnservedCells(table, plan, config.source);
  for (const auto& op : plan.ops) plan.routes.emplace_back(op, describeRoute(table, benchOpTypes(op), plan.params));
}

}  // namespace commhost::cli
