// SPDX-License-Identifier: Apache-2.0
// prefertuner: a tuner plugin for the tests (commhost/sdk/tuner.h). It puts the backend
// named by `prefer` first for the size classes at or above `from_bytes`, and counts the
// questions it was asked in the file `count_file` (when set), so tests see where the
// host asks. Broken on purpose, for the refusals: `per_rank` makes each rank answer
// differently (`per_rank_below: N`: only in groups of fewer than N ranks, so a group
// forms and a shrink's round is refused), `drop` answers with one candidate fewer, and
// `fail_rank` makes the factory throw on that rank.
#include <algorithm>
#include <cstdio>

#include "commhost/sdk/plugin.h"

namespace {

using namespace commhost;

class PreferTuner final : public Tuner {
 public:
  PreferTuner(const OptionValues& o, const TunerContext& ctx)
      : prefer_(o.getString("prefer")),
        fromBytes_(o.getInt("from_bytes")),
        perRank_(o.getBool("per_rank")),
        perRankBelow_(o.getInt("per_rank_below")),
        drop_(o.getBool("drop")),
        countFile_(o.getString("count_file")),
        rank_(ctx.rank) {}
  ~PreferTuner() override {
    if (countFile_.empty()) return;
    if (std::FILE* f = std::fopen(countFile_.c_str(), "a")) {
      std::fprintf(f, "%d\n", asked_);
      std::fclose(f);
    }
  }

  void order(const TuneQuery& query, std::vector<TuneCandidate>& candidates) override {
    ++asked_;
    if (drop_) {
      candidates.pop_back();
      return;
    }
    if (perRank_ || query.worldSize < perRankBelow_) {
      std::rotate(candidates.begin(), candidates.begin() + rank_ % candidates.size(), candidates.end());
      return;
    }
    if (query.minBytes < fromBytes_) return;
    for (size_t i = 0; i < candidates.size(); ++i)
      if (candidates[i].backend == prefer_)
        std::rotate(candidates.begin(), candidates.begin() + i, candidates.begin() + i + 1);
  }

 private:
  std::string prefer_;
  int64_t fromBytes_;
  bool perRank_;
  int64_t perRankBelow_;
  bool drop_;
  std::string countFile_;
  int rank_;
  int asked_ = 0;
};

std::unique_ptr<Tuner> create(const OptionValues& options, const TunerContext& ctx) {
  if (options.getInt("fail_rank") == ctx.rank)
    throw PluginError("prefertuner fails on rank " + std::to_string(ctx.rank));
  return std::make_unique<PreferTuner>(options, ctx);
}

const PluginDescriptor kDescriptor = {
    COMMHOST_DESCRIPTOR_PREFIX,
    PluginKind::Tuner,
    "prefertuner",
    "1.0",
    "Test tuner that puts one named backend first from a size on",
    {
        {"prefer", OptionType::String, "", "the backend to put first"},
        {"from_bytes", OptionType::Size, "0", "the smallest size class it applies to"},
        {"per_rank", OptionType::Bool, "false", "each rank answers differently (broken on purpose)"},
        {"per_rank_below", OptionType::Int, "0", "per_rank in groups of fewer ranks than this"},
        {"drop", OptionType::Bool, "false", "answers with one candidate fewer (broken on purpose)"},
        {"fail_rank", OptionType::Int, "-1", "the factory throws on this rank (broken on purpose)"},
        {"count_file", OptionType::String, "", "appends the number of questions asked to this file"},
    },
    {},
    nullptr,
    nullptr,
    nullptr,
    nullptr,
    nullptr,
    nullptr,
    create,
};

}  // namespace

COMMHOST_PLUGIN(kDescriptor)
