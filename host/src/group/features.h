// SPDX-License-Identifier: Apache-2.0
// Internal: checks of the capability features the host can verify itself.
#pragma once

#include <string>

#include "commhost/config.h"
#include "commhost/errors.h"
#include "commhost/process_group.h"
#include "commhost/registry.h"
#include "commhost/sdk/capabilities.h"

namespace commhost {

// Throws ConfigError when a usable backend that some route of `config` uses does not
// declare `feature` (every used backend is created for every group, so each must have it). `need`
// says why this job needs it, `next` what to do. Unavailable plugins are skipped: a
// route to them fails when used, with their own reason.
void requireFeature(const Config& config, const PluginRegistry& registry, Feature feature, const ErrorContext& where,
                    const std::string& need, const std::string& next);

// MultiProcess when the launch has several ranks (init() runs one process per rank),
// MultiHost when they span hosts (fewer local ranks than ranks).
void checkLaunchFeatures(const Config& config, const PluginRegistry& registry, const LaunchInfo& launch);

}  // namespace commhost
