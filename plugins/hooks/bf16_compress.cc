// SPDX-License-Identifier: Apache-2.0
// `bf16_compress`: c10d's bf16_compress_hook, and as `wrap: bf16` its bf16_compress_wrapper.
// The bucket travels as bfloat16 (half the bytes of f32): cast, average, cast back. Around
// another hook it casts the bucket the inner hook sees (PowerSGD's P and Q then travel in
// 16 bit). The hook is the SDK's makeCompressHook; this file is its descriptor.
#include "commhost/sdk/hook_sdk.h"
#include "commhost/sdk/plugin.h"

namespace {

std::unique_ptr<commhost::CommHook> create(const commhost::OptionValues&, const commhost::CommHookContext& ctx) {
  return commhost::hooks::makeCompressHook(commhost::DType::BFloat16, ctx.inner);
}

const commhost::PluginDescriptor kDescriptor = {
    COMMHOST_DESCRIPTOR_PREFIX,
    commhost::PluginKind::CommHook,
    "bf16_compress",
    "1.0",
    "Comm hook: average the bucket sent as bf16; `wrap: bf16` sends another hook's bucket as bf16",
    {},
    {},
    nullptr,
    nullptr,
    nullptr,
    create,
    "bf16",
};

}  // namespace

COMMHOST_PLUGIN(kDescriptor)
