// SPDX-License-Identifier: Apache-2.0
// The Python objects over ProcessGroup and Work (commhost.ProcessGroup, commhost.Work).
#pragma once

#include <memory>
#include <mutex>
#include <vector>

#include "bridge.h"
#include "commhost/mutex.h"
#include "commhost/process_group.h"
#include "commhost/work.h"

namespace commhost::python {

// commhost.ProcessGroup. Keeps the overrides the group's config was loaded with, so
// reconfigure() loads the next config as init() loaded the first (as syncPoint does).
struct PyGroup {
  std::shared_ptr<ProcessGroup> pg;
  ConfigOverrides overrides;
  // The C++ group takes one issuing thread at a time (reconfigure replaces the snapshot
  // an issuing thread reads): Python threads calling one group take turns here. Taken
  // only with the GIL released, so a waiter never holds the GIL.
  mutable Mutex issueMutex;

  PyGroup(std::shared_ptr<ProcessGroup> group, ConfigOverrides o);
  // Destroying a group waits for its works, whose backends may need this thread's GIL to
  // release arrays: let go of it meanwhile.
  ~PyGroup();
  ProcessGroup& group() const { return *pg; }
};
using PyGroupPtr = std::shared_ptr<PyGroup>;
using PyGroupClass = py::class_<PyGroup, PyGroupPtr>;

// Wraps a new group (null: None) and remembers it for shutdownAll().
py::object wrapGroup(std::shared_ptr<ProcessGroup> group, const ConfigOverrides& overrides);
// Shuts down every group still alive (atexit), before Python tears its objects down.
void shutdownAll();

// commhost.Work. The arrays of the call stay alive until the work completes, even when
// the Work object is dropped first (a completion callback holds them).
struct PyWork {
  WorkPtr work;
  std::shared_ptr<ProcessGroup> group;  // a work may point into the group's backends
  static std::shared_ptr<PyWork> make(WorkPtr work, std::shared_ptr<ProcessGroup> group, std::vector<Tensor> keep);
  // The last Work of a dropped group destroys it: as ~PyGroup, without the GIL (the
  // supervisor's hook thread may need it to finish a Python completion hook).
  ~PyWork();
};
using PyWorkPtr = std::shared_ptr<PyWork>;

// Runs `call` on the C++ group without the GIL and in this thread's turn (issueMutex):
// every call that issues on the group or replaces its state goes through here.
template <class F> auto inTurn(const PyGroup& g, F&& call) {
  py::gil_scoped_release unlocked;
  MutexLock turn(&g.issueMutex);
  return call(g.group());
}

// Issues `call` (which runs the C++ op) in turn and wraps its Work.
template <class F> PyWorkPtr issue(const PyGroup& g, std::vector<Tensor> keep, F&& call) {
  WorkPtr work = inTurn(g, std::forward<F>(call));
  return PyWork::make(std::move(work), g.pg, std::move(keep));
}

ReduceOp toReduceOp(py::handle op);
void defineCollectives(PyGroupClass& cls);  // group.cc
void defineAdmin(PyGroupClass& cls);        // group_admin.cc

}  // namespace commhost::python
