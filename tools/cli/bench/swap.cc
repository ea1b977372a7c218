// SPDX-License-Identifier: Apache-2.0
#include "swap.h"

#include <algorithm>

#include "commhost/errors.h"
#include "commhost/registry.h"
#include "timing.h"

namespace commhost::cli {

std::vector<std::shared_ptr<const Config>> loadSwapConfigs(const std::string& list,
                                                           const std::vector<std::string>& sets) {
  // The plugins are looked up by name in the group's registry when it swaps; this one
  // only validates the files (it finds the same plugins on the same path).
  PluginRegistry registry;
  ConfigOverrides overrides;
  overrides.set = sets;
  std::vector<std::shared_ptr<const Config>> out;
  for (size_t at = 0; at <= list.size();) {
    const size_t comma = std::min(list.find(',', at), list.size());
    const std::string path = list.substr(at, comma - at);
    if (path.empty()) throw InvalidArgument("--configs " + list + ": an empty file name; write a.yaml,b.yaml");
    out.push_back(std::make_shared<Config>(loadConfigFile(path, registry, overrides)));
    at = comma + 1;
  }
  return out;
}

Swapper::Swapper(std::vector<std::shared_ptr<const Config>> configs, int every)
    : configs_(std::move(configs)), every_(every) {}

void Swapper::beforeRun(ProcessGroup& pg, long run) {
  if (run <= 0 || run % every_ != 0) return;
  size_t next = 0;  // after the config the group runs, so that each swap is a real change
  for (size_t i = 0; i < configs_.size(); ++i)
    if (configs_[i]->hash == pg.config().hash) next = (i + 1) % configs_.size();
  const auto& config = configs_[next];
  done_.push_back({config->source, pg.reconfigure(config)});
}

void Swapper::print(std::FILE* out) const {
  const auto ms = [](std::chrono::microseconds us) { return static_cast<double>(us.count()) / 1000.0; };
  std::vector<double> totals;
  for (size_t i = 0; i < done_.size(); ++i) {
    const auto& [source, r] = done_[i];
    std::string kept, built;
    for (const auto& n : r.kept) kept += (kept.empty() ? "" : ",") + n;
    for (const auto& n : r.built) built += (built.empty() ? "" : ",") + n;
    std::fprintf(out,
                 "# swap %zu to %s: generation %llu, check %.2f ms, drain %.2f ms, build %.2f ms, commit %.2f ms, "
                 "total %.2f ms (kept %s; built %s)\n",
                 i + 1, source.c_str(), static_cast<unsigned long long>(r.generation), ms(r.check), ms(r.drain),
                 ms(r.build), ms(r.commit), ms(r.total), kept.empty() ? "-" : kept.c_str(),
                 built.empty() ? "-" : built.c_str());
    totals.push_back(ms(r.total));
  }
  if (totals.empty()) {
    std::fprintf(out, "# no swaps: the run had fewer than --swap-every runs of the op\n");
    return;
  }
  std::sort(totals.begin(), totals.end());
  std::fprintf(out, "# %zu swaps: total p50 %.2f ms, p99 %.2f ms, max %.2f ms\n", totals.size(),
               percentile(totals, 0.50), percentile(totals, 0.99), totals.back());
  std::fflush(out);
}

}  // namespace commhost::cli
