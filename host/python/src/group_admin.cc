// SPDX-License-Identifier: Apache-2.0
// commhost.ProcessGroup beyond the ops: what it is (rank, size, generation, config),
// subgroups, hot swap (reconfigure, sync_point), shadow report, flight recorder, teardown.
#include <pybind11/stl.h>

#include <cstdio>
#include <mutex>

#include "commhost/errors.h"
#include "commhost/mutex.h"
#include "commhost/registry.h"
#include "commhost/supervisor.h"
#include "group.h"

namespace commhost::python {

using py::arg;

namespace {

Mutex gLiveMutex;
std::vector<std::weak_ptr<ProcessGroup>> gLive GUARDED_BY(gLiveMutex);

std::string hex(uint64_t v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

double seconds(std::chrono::microseconds us) { return static_cast<double>(us.count()) / 1e6; }

// A path (str or os.PathLike) or YAML text (anything with a newline).
std::shared_ptr<const Config> loadForGroup(const PyGroup& g, py::handle config) {
  const std::string text = py::module_::import("os").attr("fspath")(config).cast<std::string>();
  py::gil_scoped_release unlocked;
  // A copy, as syncPoint does: loading extends the registry's search path with the
  // config's plugin_path; reconfigure() still looks plugins up in the group's own registry.
  PluginRegistry registry = g.group().registry();
  return std::make_shared<Config>(text.find('\n') != std::string::npos
                                      ? loadConfigText(text, "<python>", registry, g.overrides)
                                      : loadConfigFile(text, registry, g.overrides));
}

py::dict reportDict(const ReconfigureReport& r) {
  py::dict d;
  d["generation"] = r.generation;
  d["kept"] = r.kept;
  d["built"] = r.built;
  d["removed"] = r.removed;
  d["reloaded"] = r.reloaded;
  py::dict times;
  times["check"] = seconds(r.check);
  times["drain"] = seconds(r.drain);
  times["build"] = seconds(r.build);
  times["commit"] = seconds(r.commit);
  times["total"] = seconds(r.total);
  d["seconds"] = times;
  return d;
}

py::dict shrinkDict(const ShrinkReport& r) {
  py::dict d;
  d["generation"] = r.generation;
  d["rank"] = r.rank;
  d["size"] = r.worldSize;
  d["old_ranks"] = r.oldRanks;
  d["removed"] = r.removed;
  d["removed_global"] = r.removedGlobal;
  d["seq"] = r.seq;
  py::dict times;
  times["agree"] = seconds(r.agree);
  times["build"] = seconds(r.build);
  times["confirm"] = seconds(r.confirm);
  times["commit"] = seconds(r.commit);
  times["total"] = seconds(r.total);
  d["seconds"] = times;
  return d;
}

py::dict shadowDict(const ShadowRecord& s) {
  py::dict d;
  d["op"] = s.op;
  d["backend"] = s.backend;
  d["shadow"] = s.shadow;
  d["bytes"] = s.bytes;
  d["samples"] = s.samples;
  d["agreed"] = s.agreed;
  d["disagreed"] = s.disagreed;
  d["failed"] = s.failed;
  d["backend_us"] = s.backendUs;
  d["shadow_us"] = s.shadowUs;
  d["first_disagreement"] = s.firstDisagreement;
  d["first_failure"] = s.firstFailure;
  return d;
}

// The flight recorder as the dump `commhost trace` reads, parsed; nothing is written
// (commhost.dump_flight_recorder writes a dump).
py::object flightRecorder(const PyGroup& g, const std::string& reason) {
  std::string text;
  {
    py::gil_scoped_release unlocked;
    text = flightRecorderJson(reason);
  }
  if (text.empty()) {
    ErrorContext where;
    where.group = g.group().name();
    where.rank = g.group().rank();
    raise(ErrorCode::InvalidArgument, where, "flight_recorder: this process has no supervisor to read",
          "Set supervisor.enabled: true in the config (the default) to record collectives");
  }
  return py::module_::import("json").attr("loads")(text);
}

// A completion hook calling a Python callable on the supervisor's hook thread (never a
// backend's), with the GIL; the callable's reference is dropped like an array's.
CompletionHook pythonHook(py::handle fn) {
  PyObject* raw = fn.ptr();
  Py_INCREF(raw);
  std::shared_ptr<PyObject> callable(raw, [](PyObject* p) { releaseWithGil([p] { Py_DECREF(p); }); });
  return [callable](const CompletionEvent& ev) {
    if (!Py_IsInitialized() || interpreterFinalizing()) return;
    py::gil_scoped_acquire gil;
    const auto secs = [](std::chrono::system_clock::time_point t) {
      return std::chrono::duration<double>(t.time_since_epoch()).count();
    };
    try {
      py::dict d;
      d["group"] = ev.group;
      d["rank"] = ev.rank;
      d["op"] = opName(ev.op);
      d["seq"] = ev.seq;
      d["backend"] = ev.backend;
      d["start"] = secs(ev.start);
      d["end"] = secs(ev.end);
      d["duration"] = static_cast<double>(ev.duration.count()) / 1e6;
      d["bytes"] = ev.bytes;
      // Seconds, like duration: the op's time on its device, when its backend timed it.
      d["device_duration"] = ev.deviceMs ? py::object(py::float_(*ev.deviceMs / 1e3)) : py::object(py::none());
      d["error"] = ev.error.empty() ? py::object(py::none()) : py::object(py::str(ev.error));
      py::handle(callable.get())(d);
    } catch (py::error_already_set& e) {
      // Printed like an exception in a __del__: the hook stays, the job goes on.
      e.discard_as_unraisable("commhost completion hook");
    }
  };
}

}  // namespace

PyGroup::PyGroup(std::shared_ptr<ProcessGroup> group, ConfigOverrides o)
    : pg(std::move(group)), overrides(std::move(o)) {}

PyGroup::~PyGroup() {
  if (PyGILState_Check()) {
    py::gil_scoped_release unlocked;
    pg.reset();
  } else {
    pg.reset();
  }
}

py::object wrapGroup(std::shared_ptr<ProcessGroup> group, const ConfigOverrides& overrides) {
  if (!group) return py::none();
  {
    MutexLock lock(&gLiveMutex);
    gLive.erase(std::remove_if(gLive.begin(), gLive.end(), [](const auto& w) { return w.expired(); }), gLive.end());
    gLive.push_back(group);
  }
  return py::cast(std::make_shared<PyGroup>(std::move(group), overrides));
}

void shutdownAll() {
  std::vector<std::shared_ptr<ProcessGroup>> live;
  {
    MutexLock lock(&gLiveMutex);
    for (auto& w : gLive)
      if (auto g = w.lock()) live.push_back(std::move(g));
    gLive.clear();
  }
  py::gil_scoped_release unlocked;
  // Subgroups first (created later), then the world group.
  for (auto it = live.rbegin(); it != live.rend(); ++it) (*it)->shutdown();
}

void defineAdmin(PyGroupClass& cls) {
  cls.def_property_readonly("rank", [](const PyGroup& g) { return g.group().rank(); })
      .def_property_readonly("size", [](const PyGroup& g) { return g.group().size(); })
      .def_property_readonly("name", [](const PyGroup& g) { return g.group().name(); })
      .def_property_readonly("global_ranks", [](const PyGroup& g) { return g.group().globalRanks(); })
      .def_property_readonly(
          "generation", [](const PyGroup& g) { return g.group().generation(); },
          "0 for the config the group started with, +1 for every reconfigure.")
      .def_property_readonly("seq", [](const PyGroup& g) { return g.group().seq(); })
      .def_property_readonly("bytes_issued", [](const PyGroup& g) { return g.group().bytesIssued(); })
      .def_property_readonly("config_source", [](const PyGroup& g) { return g.group().config().source; })
      .def_property_readonly(
          "config_yaml", [](const PyGroup& g) { return g.group().config().effectiveYaml; },
          "The effective config (defaults filled in) of the current generation.")
      .def_property_readonly("config_hash", [](const PyGroup& g) { return hex(g.group().config().hash); })
      .def_property_readonly(
          "routes", [](const PyGroup& g) { return g.group().routes().describe(); },
          "The resolved route table, as `commhost config check` prints it.")
      .def(
          "new_group",
          [](const PyGroup& g, const std::vector<int>& ranks) {
            auto sub = inTurn(g, [&](ProcessGroup& pg) { return pg.newGroup(ranks); });
            return wrapGroup(std::move(sub), g.overrides);
          },
          arg("ranks"), "Collective: every member calls it. None on ranks not in `ranks`.")
      .def(
          "split",
          [](const PyGroup& g, int color, int key) {
            auto sub = inTurn(g, [&](ProcessGroup& pg) { return pg.split(color, key); });
            return wrapGroup(std::move(sub), g.overrides);
          },
          arg("color"), arg("key") = 0,
          "Collective: groups ranks by color (ordered by key, then rank); a negative color gives None.")
      .def(
          "reconfigure",
          [](const PyGroup& g, py::handle config, bool onlyIfShadowAgrees, bool reloadPlugins, py::handle timeout) {
            ReconfigureOptions o;
            o.onlyIfShadowAgrees = onlyIfShadowAgrees;
            o.reloadPlugins = reloadPlugins;
            o.timeout = toMillis(timeout, "reconfigure");
            auto next = loadForGroup(g, config);
            const ReconfigureReport r = inTurn(g, [&](ProcessGroup& pg) { return pg.reconfigure(next, o); });
            return reportDict(r);
          },
          arg("config"), arg("only_if_shadow_agrees") = false, arg("reload_plugins") = false,
          arg("timeout") = py::none(),
          "Hot swap to a config file (or YAML text), a collective over the group: all ranks switch or none. "
          "Returns what it did (generation, kept/built/removed backends, phase seconds).")
      .def(
          "shrink",
          [](const PyGroup& g, py::handle timeout) {
            ShrinkOptions o;
            o.timeout = toMillis(timeout, "shrink");
            return shrinkDict(inTurn(g, [&](ProcessGroup& pg) { return pg.shrink(o); }));
          },
          arg("timeout") = py::none(),
          "Elastic membership: after an op failed because a peer was lost, every survivor calls it; the group "
          "goes on without the lost ranks, renumbered densely (rank and size change). Returns the new rank, "
          "size, old_ranks (old rank of each new rank), removed ranks and phase seconds. Raises on a rank "
          "the others removed and below supervisor.min_ranks (see ProcessGroup::shrink).")
      .def(
          "sync_point", [](const PyGroup& g) { inTurn(g, [](ProcessGroup& pg) { pg.syncPoint(); }); },
          "A step boundary: applies a config published by `commhost run --watch` (see ProcessGroup::syncPoint).")
      .def("sync_status",
           [](const PyGroup& g) {
             const auto s = g.group().syncStatus();
             py::dict d;
             d["count"] = s.count;
             d["epoch"] = s.epoch;
             d["last_error"] = s.lastError;
             return d;
           })
      .def(
          "shadow_report",
          [](const PyGroup& g, py::handle wait) {
            const bool none = wait.is_none() || (py::isinstance<py::int_>(wait) && wait.cast<long long>() == 0) ||
                              (py::isinstance<py::float_>(wait) && wait.cast<double>() == 0);
            const auto waitFor = none ? std::chrono::milliseconds(0) : toMillis(wait, "shadow_report(wait=...)");
            std::vector<ShadowRecord> records;
            {
              py::gil_scoped_release unlocked;  // the wait may take up to `wait` seconds
              records = g.group().shadowReport(waitFor);
            }
            py::list out;
            for (const auto& s : records) out.append(shadowDict(s));
            return out;
          },
          arg("wait") = py::none(),
          "Shadow mode: one dict per (op, backend, shadow, size class) compared so far. wait (seconds): first wait "
          "up to that long for comparisons still running (a shadow runs after its op returns); None or 0: no wait.")
      .def("flight_recorder", &flightRecorder, arg("reason") = "python",
           "This process's flight recorder, parsed, as a dump holds it (writes no file; "
           "commhost.dump_flight_recorder does).")
      .def(
          "add_completion_hook",
          [](const PyGroup& g, py::function fn) { return g.group().addCompletionHook(pythonHook(fn)); }, arg("fn"),
          "Calls fn(event) for every work of this group that ends, on the supervisor's hook thread, one at a "
          "time: event is a dict (group, rank, op, seq, backend, start, end, duration in seconds, bytes, "
          "device_duration in seconds (the op's time on its device) or None, error or None). Returns an id for "
          "remove_completion_hook. An exception in fn is printed; the hook stays.")
      .def(
          "remove_completion_hook",
          [](const PyGroup& g, int id) {
            py::gil_scoped_release unlocked;  // the hook thread may be waiting for the GIL in that hook
            g.group().removeCompletionHook(id);
          },
          arg("id"))
      .def(
          "abort",
          [](const PyGroup& g, const std::string& reason) {
            py::gil_scoped_release unlocked;
            g.group().abort(reason);
          },
          arg("reason") = "aborted from Python")
      .def("shutdown",
           [](const PyGroup& g) {
             py::gil_scoped_release unlocked;
             g.group().shutdown();
           })
      .def("__enter__", [](py::object self) { return self; })
      .def("__exit__",
           [](const PyGroup& g, py::args) {
             py::gil_scoped_release unlocked;
             g.group().shutdown();
           })
      .def("__repr__", [](const PyGroup& g) {
        return "<commhost.ProcessGroup " + g.group().name() + " rank " + std::to_string(g.group().rank()) + "/" +
               std::to_string(g.group().size()) + " generation " + std::to_string(g.group().generation()) + ">";
      });
}

}  // namespace commhost::python
