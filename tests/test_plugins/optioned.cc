// SPDX-License-Identifier: Apache-2.0
// A backend with one option of every type, for option validation tests. World size 1.
#include "../../plugins/self/self_backend.h"

namespace {

const commhost::PluginDescriptor kDescriptor = {
    COMMHOST_DESCRIPTOR_PREFIX,
    commhost::PluginKind::Backend,
    "optioned",
    "1.0",
    "Test plugin declaring one option of each type",
    {
        {"threads", commhost::OptionType::Int, "2", "worker threads", {}, 1, 64},
        {"algorithm", commhost::OptionType::Enum, "ring", "algorithm", {"ring", "tree"}},
        {"segment", commhost::OptionType::Size, "1MiB", "segment size"},
        {"timeout", commhost::OptionType::Duration, "5s", "timeout"},
        {"verbose", commhost::OptionType::Bool, "false", "chatty"},
        {"ratio", commhost::OptionType::Double, "0.5", "a ratio"},
        {"device", commhost::OptionType::String, "lo", "interface"},
        {"hosts", commhost::OptionType::StringList, "", "host list"},
        {"tuning.chunk", commhost::OptionType::Size, "64KiB", "a nested option"},
    },
    commhost::self::kCapabilities,
    nullptr,
    commhost::self::create,
};

}  // namespace

COMMHOST_PLUGIN(kDescriptor)
