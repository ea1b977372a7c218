// SPDX-License-Identifier: Apache-2.0
// Internal: the one place commhost reads its process environment. Settings from the
// environment enter through the config (COMMHOST_<KEY> overrides) or the launch info;
// nothing deeper reads variables.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace commhost::config {

std::optional<std::string> readEnv(const char* name);
// Every COMMHOST_* variable set, as (name, value).
std::vector<std::pair<std::string, std::string>> commhostVariables();
// Variables with their own meaning that are not config keys.
bool isReservedVariable(const std::string& name);
// The COMMHOST_ variable that overrides a dotted key: letters upper-cased, digits kept,
// every other character '_' (group.timeout -> COMMHOST_GROUP_TIMEOUT,
// backends.my-nccl.options.threads -> COMMHOST_BACKENDS_MY_NCCL_OPTIONS_THREADS).
std::string variableForKey(const std::string& key);
// The key=value lines of COMMHOST_OVERRIDES (what `commhost run --set` passes to ranks).
std::vector<std::string> overridesFromEnv();
// supervisor.flight_recorder.dump_dir when the config leaves it empty: $TMPDIR/commhost-traces-<uid>
// (/tmp when TMPDIR is unset or empty). Not the working directory: a job (or a test run)
// started in a checkout must not leave dumps in it.
std::string defaultDumpDir();
// The first host of a Slurm node list ("node[01-04,07],gpu5" -> "node01"); "" if malformed.
std::string firstSlurmHost(const std::string& list);
// The config text `commhost run` read when it started the job (COMMHOST_CONFIG_TEXT), when
// `path` is the file it handed the ranks (COMMHOST_CONFIG): every rank starts on that
// text even if the file is edited while they start (`--watch` publishes the edit).
std::optional<std::string> launchConfigText(const std::string& path);
// Directories in COMMHOST_PLUGIN_PATH, in order.
std::vector<std::string> pluginPathFromEnv();

}  // namespace commhost::config
