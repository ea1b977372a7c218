// SPDX-License-Identifier: Apache-2.0
// Config: the validated, typed form of a commhost YAML configuration.
//
// Every host key is declared once (configSchema()) with its type, default and
// description. loadConfig() parses the YAML and applies overrides: COMMHOST_<KEY>
// environment variables (e.g. COMMHOST_GROUP_TIMEOUT=10s), then the --set lines
// `commhost run` passes in COMMHOST_OVERRIDES, then ConfigOverrides::set (last wins).
// It checks every key, validates each plugin's options against that plugin's schema
// and each route against the backends' capabilities, and throws ConfigError listing
// every problem with file:line:col (or the override that caused it).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "commhost/export.h"
#include "commhost/sdk/option_schema.h"
#include "commhost/types.h"

namespace commhost {

class PluginRegistry;

struct PluginRef {
  std::string plugin;    // plugin name
  OptionValues options;  // validated against the plugin's schema, defaults filled in
  std::string where;     // "file:line:col" of the entry, for messages
  std::string wrap;      // hooks: only: the wrapper plugin around this hook (`wrap:`), "" for none
};

// One entry of `routes:`. Keys left unset match anything the route's backends serve.
struct RouteSpec {
  std::optional<DeviceType> device;
  std::optional<OpType> op;
  std::optional<DType> dtype;              // `dtype:`, for ops that carry data
  std::optional<ReduceOp::Kind> reduceOp;  // `reduce_op:`, for reducing ops only
  int64_t minBytes = 0;
  int64_t maxBytes = INT64_MAX;       // inclusive
  std::string backend;                // the first backend listed (`backend: x` or `backend: [x, ...]`)
  std::vector<std::string> fallback;  // the rest of the list, tried in order
  std::string where;
  // Shadow mode (`shadow: NAME`, `sample: RATE`, `rtol:`, `atol:`): that share of the
  // route's allreduce, broadcast and allgather_into_tensor calls (the same calls on every
  // rank, picked by seq) also runs on backend NAME over copies of its data, off the
  // caller's path, and the results are compared: integers exactly, floats within
  // |a - b| <= atol + rtol * |b|. See ProcessGroup::shadowReport().
  std::string shadow;  // empty: no shadow
  double sample = 0.01;
  double rtol = 1e-5, atol = 1e-6;
  // Live re-routing (`tune: live`, with two or more backends listed and no `shadow:`): the
  // sampled calls (`sample:`) also run on the listed backends the cell is not routed to,
  // as shadows do; every `tune.live_every` sync points the ranks pool what they measured
  // and move a size class to a candidate that agreed on every sampled call and was faster
  // by `tune.live_margin` over `tune.live_window` of them, all at the same syncPoint()
  // (a routes-only swap: no backend is rebuilt). See ProcessGroup::syncPoint().
  bool live = false;

  // Every backend listed, in order of preference.
  std::vector<std::string> backends() const {
    std::vector<std::string> all{backend};
    all.insert(all.end(), fallback.begin(), fallback.end());
    return all;
  }
};

struct Config {
  std::string source;  // file path or "<embedded default>"
  OptionValues host;   // every key of configSchema(), e.g. "group.timeout"
  PluginRef store;
  std::map<std::string, PluginRef> backends;  // by backend name
  std::vector<RouteSpec> routes;
  std::map<std::string, PluginRef> hooks;  // by hook name
  // `tuner:`, when named: the plugin that orders each route's backends by size class when
  // a group builds its route table (commhost/sdk/tuner.h).
  std::optional<PluginRef> tuner;
  std::vector<std::string> warnings;  // e.g. an unknown COMMHOST_ variable, an unavailable plugin
  std::string effectiveYaml;          // the full effective config, defaults included
  uint64_t hash = 0;                  // FNV-1a of effectiveYaml less its per-host keys (dump_dir):
                                      // what the ranks must agree on; equal configs, equal hash

  std::string groupName() const { return host.getString("group.name"); }
  std::chrono::milliseconds timeout() const { return host.getDuration("group.timeout"); }
};

// The host's own keys (not plugin options, not the backends/routes/hooks tables).
COMMHOST_API const std::vector<OptionSpec>& configSchema();

struct ConfigOverrides {
  std::vector<std::string> set;  // "key=value", applied in order
  bool fromEnvironment = true;   // also read COMMHOST_<KEY> variables
};

// `text` is YAML; `source` names it in messages. The registry must already hold the
// plugins; its search path is extended by the config's plugin_path first.
COMMHOST_API Config loadConfigText(const std::string& text, const std::string& source, PluginRegistry& registry,
                                   const ConfigOverrides& overrides = {});
COMMHOST_API Config loadConfigFile(const std::string& path, PluginRegistry& registry,
                                   const ConfigOverrides& overrides = {});
// A config named the way -c, COMMHOST_CONFIG and loadConfigFile take it: a file that
// exists is itself; a bare name that is no file here ("shm" or "shm.yaml") is an installed
// config, <prefix>/share/commhost/configs/NAME.yaml beside this libcommhost (in a build
// tree: the source tree's configs/). Anything else comes back unchanged (reading it then
// fails naming it and the installed configs).
COMMHOST_API std::string resolveConfigPath(const std::string& nameOrPath);
// The folder of the installed configs (or the source tree's configs/ for a build tree).
COMMHOST_API std::string installedConfigDir();
// The config a rank loads: the file at `path`, or the embedded default when `path` is
// empty (init() with no COMMHOST_CONFIG). Tools that must see what the ranks will see
// (`commhost run`, `bench`) call this rather than choosing themselves.
COMMHOST_API Config loadConfigOrDefault(const std::string& path, PluginRegistry& registry,
                                        const ConfigOverrides& overrides = {});
// The plugin folders the config file `path` names (plugin_path), a relative one resolved
// against the file's folder; `warnings` gets one line per folder that does not exist.
// Reads nothing else of the file, so tools that only search plugins (`commhost plugins
// list -c`) work with a config that has other errors. Throws ConfigError for an
// unreadable file or a malformed plugin_path.
COMMHOST_API std::vector<std::string> configPluginPath(const std::string& path, std::vector<std::string>& warnings);
// COMMHOST_CONFIG, or "" when it is unset.
COMMHOST_API std::string configPathFromEnvironment();
// Validates option text (as a user would write it in YAML) against `specs`, fills in
// defaults, and throws ConfigError naming `where` for every problem. For tools that
// create a plugin object without a config file (e.g. `commhost store serve`).
COMMHOST_API OptionValues resolveOptions(const std::vector<OptionSpec>& specs,
                                         const std::map<std::string, std::string>& values, const std::string& where);

// The built-in default (configs/default.yaml as shipped), embedded in libcommhost.
COMMHOST_API const std::string& defaultConfigText();

}  // namespace commhost
