// SPDX-License-Identifier: Apache-2.0
// measured: the built-in tuner (commhost/sdk/tuner.h). It reads the table `commhost tune
// --table FILE` measured in a job of the same world size (commhost/sdk/measured_table.h)
// and puts first, for each size class, the candidate that was fastest there and right in
// every round, when it beat the route's own first choice by `min_gain`. Where the table
// says nothing (another world size, device, dtype or reduce op than it measured, an op it
// did not measure, a backend it did not measure) the config's order stays.
#include <algorithm>
#include <cstddef>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "commhost/sdk/measured_table.h"
#include "commhost/sdk/plugin.h"
#include "commhost/sdk/typed_options.h"

namespace commhost::measured_tuner {
namespace {

std::string readFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw ConfigError("cannot read measured table '" + path + "'; write it with `commhost tune --table FILE`");
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

struct Options {
  std::string table;
  double minGain = 0.05;
  static OptionSchema<Options> schema() {
    return OptionSchema<Options>()
        .option("table", &Options::table, "",
                "The measured table `commhost tune --table FILE` wrote (the same file on every host)")
        .option("min_gain", &Options::minGain, "0.05",
                "A candidate goes before the route's first choice only when the table has it faster by at least this "
                "fraction (so noise does not reorder a route)",
                {0, 0.99});
  }
  void validate() const {
    if (table.empty()) refuseOption("table", "is required: the file `commhost tune --table FILE` wrote");
  }
  // Where the config is loaded (config check, commhost run, each rank): the file is there
  // and is a table this commhost reads.
  std::string checkHere() const {
    try {
      parseMeasuredTable(readFile(table), table);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }
};

class MeasuredTuner final : public Tuner {
 public:
  MeasuredTuner(MeasuredTable table, double minGain) : table_(std::move(table)), minGain_(minGain) {}

  void order(const TuneQuery& q, std::vector<TuneCandidate>& candidates) override {
    if (q.worldSize != table_.worldSize || q.device != table_.device) return;
    if ((q.hasDtype && q.dtype != table_.dtype) || (q.hasReduceOp && q.reduceOp != table_.reduceOp)) return;
    std::vector<std::string> names;
    for (const auto& c : candidates) names.push_back(c.backend);
    double bestUs = 0;
    const std::string best = table_.fastest(q.op, q.minBytes, q.maxBytes, names, &bestUs);
    if (best.empty() || best == names.front()) return;
    const double firstUs = table_.timeOf(q.op, q.minBytes, q.maxBytes, names.front());
    if (firstUs >= 0 && bestUs > firstUs * (1 - minGain_)) return;  // not clearly faster
    for (size_t i = 1; i < candidates.size(); ++i)
      if (candidates[i].backend == best)
        std::rotate(candidates.begin(), candidates.begin() + static_cast<std::ptrdiff_t>(i),
                    candidates.begin() + static_cast<std::ptrdiff_t>(i) + 1);
  }

 private:
  MeasuredTable table_;
  double minGain_;
};

std::unique_ptr<Tuner> create(const Options& options, const TunerContext& ctx) {
  MeasuredTable table = parseMeasuredTable(readFile(options.table), options.table);
  if (table.worldSize != ctx.worldSize && ctx.logger)
    ctx.logger->info("measured table " + options.table + " was measured at " + std::to_string(table.worldSize) +
                     " ranks; group " + ctx.groupName + " has " + std::to_string(ctx.worldSize) +
                     ": it keeps the config's order");
  return std::make_unique<MeasuredTuner>(std::move(table), options.minGain);
}

const PluginDescriptor kDescriptor = {
    COMMHOST_DESCRIPTOR_PREFIX,
    PluginKind::Tuner,
    "measured",
    "1.0",
    "Tuner that orders each route's backends by the table `commhost tune --table` measured",
    typedOptionSpecs<Options>(),
    {},
    nullptr,
    nullptr,
    nullptr,
    nullptr,
    nullptr,
    typedOptionCheck<Options>,
    typedTunerFactory<Options, &create>,
};

}  // namespace
}  // namespace commhost::measured_tuner

COMMHOST_PLUGIN(commhost::measured_tuner::kDescriptor)
