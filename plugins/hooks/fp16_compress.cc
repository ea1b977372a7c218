// SPDX-License-Identifier: Apache-2.0
// `fp16_compress`: c10d's fp16_compress_hook, and as `wrap: fp16` its fp16_compress_wrapper.
// The bucket travels as IEEE half (half the bytes of f32): cast, average, cast back. Around
// another hook it casts the bucket the inner hook sees (PowerSGD's P and Q then travel in
// 16 bit). The hook is the SDK's makeCompressHook; this file is its descriptor.
#include "commhost/sdk/hook_sdk.h"
#include "commhost/sdk/plugin.h"

namespace {

std::unique_ptr<commhost::CommHook> create(const commhost::OptionValues&, const commhost::CommHookContext& ctx) {
  return commhost::hooks::makeCompressHook(commhost::DType::Float16, ctx.inner);
}

const commhost::PluginDescriptor kDescriptor = {
    COMMHOST_DESCRIPTOR_PREFIX,
    commhost::PluginKind::CommHook,
    "fp16_compress",
    "1.0",
    "Comm hook: average the bucket sent as fp16; `wrap: fp16` sends another hook's bucket as fp16",
    {},
    {},
    nullptr,
    nullptr,
    nullptr,
    create,
    "fp16",
};

}  // namespace

COMMHOST_PLUGIN(kDescriptor)
