// SPDX-License-Identifier: Apache-2.0
// Module-level functions: init() (the world group from the launch environment), and what
// the CLI's `plugins list` and `config check` show, as Python data.
#include <pybind11/stl.h>

#include <cstdio>

#include "commhost/config.h"
#include "commhost/dispatcher.h"
#include "commhost/errors.h"
#include "commhost/registry.h"
#include "commhost/sdk/capabilities.h"
#include "group.h"

namespace commhost::python {

using py::arg;

namespace {

std::string pathText(py::handle p) { return py::module_::import("os").attr("fspath")(p).cast<std::string>(); }

// {"group.timeout": "10s", "logging.level": "debug"} or ["group.timeout=10s", ...] as
// the --set lines of the CLI. Booleans are written as YAML spells them.
ConfigOverrides toOverrides(py::handle overrides) {
  ConfigOverrides o;
  if (overrides.is_none()) return o;
  if (py::isinstance<py::dict>(overrides)) {
    for (auto item : py::reinterpret_borrow<py::dict>(overrides)) {
      const std::string key = py::str(item.first);
      std::string value = py::isinstance<py::bool_>(item.second) ? (item.second.cast<bool>() ? "true" : "false")
                                                                 : std::string(py::str(item.second));
      o.set.push_back(key + "=" + value);
    }
    return o;
  }
  if (py::isinstance<py::sequence>(overrides) && !py::isinstance<py::str>(overrides)) {
    for (auto item : py::reinterpret_borrow<py::sequence>(overrides)) {
      const std::string line = py::str(item);
      if (line.find('=') == std::string::npos)
        throw InvalidArgument("commhost: override '" + line + "' is not key=value; e.g. 'group.timeout=10s'");
      o.set.push_back(line);
    }
    return o;
  }
  throw InvalidArgument("commhost: overrides must be a dict {key: value} or a list of 'key=value' strings");
}

py::list pluginList(const std::vector<std::string>& extra, py::handle config) {
  std::vector<std::string> dirs = extra;
  std::vector<std::string> warnings;
  const std::string cfg = config.is_none() ? configPathFromEnvironment() : pathText(config);
  if (!cfg.empty())
    for (const auto& d : configPluginPath(cfg, warnings)) dirs.push_back(d);
  PluginRegistry registry;
  registry.scan(PluginRegistry::searchPath(dirs));
  py::list out;
  for (const auto& e : registry.entries()) {
    py::dict d;
    d["name"] = e.name;
    d["kind"] = e.descriptor ? py::object(py::str(pluginKindName(e.descriptor->kind))) : py::object(py::none());
    d["version"] = e.descriptor && e.descriptor->version ? py::object(py::str(e.descriptor->version))
                                                         : py::object(py::none());
    d["description"] = e.descriptor && e.descriptor->description ? py::object(py::str(e.descriptor->description))
                                                                 : py::object(py::none());
    d["path"] = e.path;
    d["usable"] = e.usable();
    d["status"] = e.usable() ? std::string("ok") : "unavailable: " + e.unavailable;
    if (e.descriptor && e.descriptor->kind == PluginKind::Backend)
      d["capabilities"] = describe(e.descriptor->capabilities);
    out.append(d);
  }
  return out;
}

py::dict configCheck(py::handle config, py::handle overrides) {
  PluginRegistry registry;
  const ConfigOverrides o = toOverrides(overrides);
  Config cfg;
  if (config.is_none()) {
    cfg = loadConfigText(defaultConfigText(), "<embedded default>", registry, o);
  } else {
    const std::string text = pathText(config);
    cfg = text.find('\n') != std::string::npos ? loadConfigText(text, "<python>", registry, o)
                                               : loadConfigFile(text, registry, o);
  }
  char hash[32];
  std::snprintf(hash, sizeof hash, "%016llx", static_cast<unsigned long long>(cfg.hash));
  py::dict d;
  d["source"] = cfg.source;
  d["effective_yaml"] = cfg.effectiveYaml;
  d["hash"] = std::string(hash);
  d["routes"] = RouteTable::forConfig(cfg, registry).describe();
  d["warnings"] = cfg.warnings;
  py::dict backends;
  for (const auto& [name, ref] : cfg.backends) backends[py::str(name)] = ref.plugin;
  d["backends"] = backends;
  d["store"] = cfg.store.plugin;
  d["group"] = cfg.groupName();
  d["timeout"] = static_cast<double>(cfg.timeout().count()) / 1000.0;
  return d;
}

}  // namespace

void registerTools(py::module_& m) {
  m.def(
      "init",
      [](py::handle config, py::handle overrides) {
        InitOptions o;
        if (!config.is_none()) o.configPath = pathText(config);
        o.overrides = toOverrides(overrides);
        std::shared_ptr<ProcessGroup> pg;
        {
          py::gil_scoped_release unlocked;
          pg = init(o);
        }
        return wrapGroup(std::move(pg), o.overrides);
      },
      arg("config") = py::none(), arg("overrides") = py::none(),
      "The world group from the launch environment (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT; Open MPI, "
      "PMI or Slurm variables) and COMMHOST_CONFIG, as the C++ commhost::init(). `config` (a path) overrides "
      "COMMHOST_CONFIG; `overrides` ({key: value} or ['key=value']) apply after the COMMHOST_<KEY> variables.");
  m.def(
      "launch_info",
      [] {
        const LaunchInfo l = detectLaunch();
        py::dict d;
        d["rank"] = l.rank;
        d["world_size"] = l.worldSize;
        d["local_rank"] = l.localRank;
        d["local_world_size"] = l.localWorldSize;
        d["master_addr"] = l.masterAddr;
        d["master_port"] = l.masterPort;
        d["config"] = l.configPath;
        d["launcher"] = l.launcher;
        return d;
      },
      "Where this process sits in the job, as init() reads it from the environment.");
  m.def("plugins", &pluginList, arg("plugin_path") = std::vector<std::string>{}, arg("config") = py::none(),
        "Every plugin found (as `commhost plugins list`): dicts with name, kind, version, description, path, "
        "usable, status (and capabilities for backends). `config`: also search its plugin_path "
        "(default COMMHOST_CONFIG).");
  m.def("config_check", &configCheck, arg("config") = py::none(), arg("overrides") = py::none(),
        "Loads and validates a config file (or YAML text; None: the embedded default) as `commhost config "
        "check`: returns source, effective_yaml, hash, routes (the resolved route table), warnings, backends, "
        "store, group, timeout; raises commhost.ConfigError with file:line for every problem.");
  m.def(
      "dump_flight_recorder",
      [](const std::string& reason) {
        py::gil_scoped_release unlocked;
        return dumpFlightRecorder(reason);
      },
      arg("reason") = "python", "Writes this process's flight recorder now; returns the file ('' with no group).");
  m.def("_shutdown_all", &shutdownAll, "atexit: shuts down every group still alive.");
}

}  // namespace commhost::python
