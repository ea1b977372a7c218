// SPDX-License-Identifier: Apache-2.0
// A third-party comm hook: sign compression (signSGD with majority vote, Bernstein et
// al., 2018). Each rank sends one byte per gradient element (its sign) and one number
// (its mean |g|); every rank then sets each element to the majority's sign times the
// ranks' average mean |g|: a quarter of the bytes of f32, at the cost of magnitudes.
//
// A hook only needs commhost/sdk/comm_hook.h, plugin.h and the SDK's hook_sdk.h (casts and
// the average allreduce). runHook() issues its collectives on the calling thread (the
// Reducer calls hooks in bucket order, the same on every rank) and returns a Future that
// completes when the bucket holds the result.
#include <cmath>

#include "commhost/process_group.h"
#include "commhost/sdk/comm_hook.h"
#include "commhost/sdk/hook_sdk.h"
#include "commhost/sdk/plugin.h"

namespace sign {

class SignHook final : public commhost::CommHook {
 public:
  explicit SignHook(bool scaled) : scaled_(scaled) {}

  commhost::FuturePtr runHook(commhost::GradBucket& bucket) override {
    if (!bucket.group) throw commhost::InvalidArgument("template_sign: bucket has no group");
    commhost::Tensor buffer = bucket.buffer;
    // Read any floating dtype as f32 (the SDK's cast), so the hook also works wrapped.
    commhost::Tensor values = commhost::hooks::castTo(buffer, commhost::DType::Float32);
    const auto* v = values.data_as<float>();
    const int64_t n = values.numel();
    commhost::Tensor signs = commhost::Tensor::empty({n}, commhost::DType::Int8);
    commhost::Tensor scale = commhost::Tensor::empty({1}, commhost::DType::Float32);
    double sumAbs = 0;
    for (int64_t i = 0; i < n; ++i) {
      signs.data_as<int8_t>()[i] = static_cast<int8_t>(v[i] > 0 ? 1 : (v[i] < 0 ? -1 : 0));
      sumAbs += std::abs(v[i]);
    }
    scale.data_as<float>()[0] = n ? static_cast<float>(sumAbs / n) : 0.f;
    // The votes (summed; at most 127 ranks, checked at creation) and the mean magnitude.
    commhost::FuturePtr votes = commhost::hooks::allreduceSum(*bucket.group, signs);
    commhost::FuturePtr magnitude = commhost::hooks::allreduceAverage(*bucket.group, scale);
    const bool scaled = scaled_;
    return magnitude->then([=](commhost::Future&) {
      votes->wait();
      const float m = scaled ? scale.data_as<float>()[0] : 1.f;
      auto* out = values.data_as<float>();
      for (int64_t i = 0; i < n; ++i) {
        const int8_t s = signs.data_as<int8_t>()[i];
        out[i] = s > 0 ? m : (s < 0 ? -m : 0.f);
      }
      commhost::hooks::copyCast(buffer, values);
      return std::vector<commhost::Tensor>{buffer};
    });
  }

 private:
  bool scaled_;
};

std::unique_ptr<commhost::CommHook> create(const commhost::OptionValues& options,
                                           const commhost::CommHookContext& ctx) {
  if (ctx.worldSize > 127)
    throw commhost::PluginError("template_sign: the votes are summed as int8, so at most 127 ranks; this group has " +
                                std::to_string(ctx.worldSize) + ". Use another hook for larger groups");
  return std::make_unique<SignHook>(options.getBool("scaled"));
}

const commhost::PluginDescriptor kDescriptor = {
    COMMHOST_DESCRIPTOR_PREFIX,
    commhost::PluginKind::CommHook,
    "template_sign",
    "0.1.0",
    "Template comm hook: sign compression with majority vote (one byte per element)",
    {{"scaled", commhost::OptionType::Bool, "true", "multiply the signs by the ranks' average mean |g|"}},
    {},
    nullptr,
    nullptr,
    nullptr,
    create,
};

}  // namespace sign

COMMHOST_PLUGIN(sign::kDescriptor)
