// SPDX-License-Identifier: Apache-2.0
// A third-party tuner (commhost/sdk/tuner.h): when a group builds its route table, it is
// asked, per op and size class, to order the backends a route lists that can serve it;
// the first one serves those calls. This one puts the backend named by `prefer` first for
// every size class from `from_bytes` on, and keeps the config's order below it.
//
// A tuner runs only while a table is built (group creation, a hot swap, a subgroup), never
// per call. It must answer from what every rank shares (the query and its options, or a
// file every host has the same copy of): the ranks compare their tables and refuse to form
// a group whose tables differ.
#include <algorithm>

#include "commhost/sdk/plugin.h"
#include "commhost/sdk/typed_options.h"

namespace prefer {

struct Options {
  std::string prefer;
  int64_t fromBytes = 0;
  static commhost::OptionSchema<Options> schema() {
    return commhost::OptionSchema<Options>()
        .option("prefer", &Options::prefer, "", "The backend (its name under backends:) to put first")
        .size("from_bytes", &Options::fromBytes, "0", "The smallest size class it is put first for", {0, 1e18});
  }
  void validate() const {
    if (prefer.empty()) commhost::refuseOption("prefer", "is required: the backend to put first");
  }
};

class PreferTuner final : public commhost::Tuner {
 public:
  explicit PreferTuner(Options options) : options_(std::move(options)) {}

  void order(const commhost::TuneQuery& query, std::vector<commhost::TuneCandidate>& candidates) override {
    if (query.minBytes < options_.fromBytes) return;  // the config's order
    auto it = std::find_if(candidates.begin(), candidates.end(),
                           [&](const commhost::TuneCandidate& c) { return c.backend == options_.prefer; });
    if (it != candidates.end()) std::rotate(candidates.begin(), it, it + 1);  // it first, the rest in order
  }

 private:
  Options options_;
};

std::unique_ptr<commhost::Tuner> create(const Options& options, const commhost::TunerContext& ctx) {
  if (ctx.logger)
    ctx.logger->info("template_tuner: " + options.prefer + " first from " + std::to_string(options.fromBytes) +
                     " bytes in group " + ctx.groupName);
  return std::make_unique<PreferTuner>(options);
}

const commhost::PluginDescriptor kDescriptor = {
    COMMHOST_DESCRIPTOR_PREFIX,
    commhost::PluginKind::Tuner,
    "template_tuner",
    "0.1.0",
    "Template tuner: puts one named backend first from a message size on",
    commhost::typedOptionSpecs<Options>(),
    {},
    nullptr,
    nullptr,
    nullptr,
    nullptr,
    nullptr,
    nullptr,
    commhost::typedTunerFactory<Options, &create>,
};

}  // namespace prefer

COMMHOST_PLUGIN(prefer::kDescriptor)
