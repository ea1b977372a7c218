// SPDX-License-Identifier: Apache-2.0
// commhost.Work and commhost.ReduceOp.
#include "commhost/errors.h"
#include "commhost/future.h"
#include "group.h"

namespace commhost::python {

PyWorkPtr PyWork::make(WorkPtr work, std::shared_ptr<ProcessGroup> group, std::vector<Tensor> keep) {
  if (!work)
    throw BackendError("commhost: the backend returned no Work for the call; report it to the plugin's author");
  // Held by the future's callback until the work ends, then dropped (on whichever thread
  // completed it; the bridge defers the Python side of that to a GIL holder).
  auto held = std::make_shared<std::vector<Tensor>>(std::move(keep));
  work->future()->whenDone([held](Future&) { held->clear(); });
  auto out = std::make_shared<PyWork>();
  out->work = std::move(work);
  out->group = std::move(group);
  return out;
}

PyWork::~PyWork() {
  if (PyGILState_Check()) {
    py::gil_scoped_release unlocked;
    work.reset();
    group.reset();
  }
}

ReduceOp toReduceOp(py::handle op) {
  if (py::isinstance<ReduceOp>(op)) return op.cast<ReduceOp>();
  if (py::isinstance<py::str>(op)) {
    const std::string name = op.cast<std::string>();
    if (name == "premul_sum")
      throw InvalidArgument("commhost: reduce op 'premul_sum' needs its factor: pass commhost.ReduceOp.premul_sum(f)");
    return ReduceOp(parseReduceOp(name));
  }
  throw InvalidArgument(
      "commhost: a reduce op is a name ('sum', 'avg', 'product', 'min', 'max', 'band', 'bor', "
      "'bxor') or a commhost.ReduceOp, not a " +
      std::string(py::str(py::type::handle_of(op).attr("__name__"))));
}

void registerWork(py::module_& m) {
  py::class_<ReduceOp> op(m, "ReduceOp", "A reduction: commhost.ReduceOp('max'), ReduceOp.premul_sum(0.5).");
  op.def(py::init([](const std::string& name) { return toReduceOp(py::str(name)); }), py::arg("name"))
      .def_static("premul_sum", &ReduceOp::preMulSum, py::arg("factor"), "Every input times `factor`, then summed.")
      .def_property_readonly("name", [](const ReduceOp& r) { return std::string(reduceOpName(r.kind)); })
      .def_readonly("factor", &ReduceOp::factor)
      .def("__eq__", [](const ReduceOp& a, const ReduceOp& b) { return a == b; })
      .def("__repr__", [](const ReduceOp& r) {
        return r.kind == ReduceOp::PreMulSum ? "ReduceOp.premul_sum(" + std::to_string(r.factor) + ")"
                                             : "ReduceOp('" + std::string(reduceOpName(r.kind)) + "')";
      });
  for (auto k : {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Product, ReduceOp::Min, ReduceOp::Max, ReduceOp::BAnd,
                 ReduceOp::BOr, ReduceOp::BXor}) {
    std::string upper = reduceOpName(k);
    for (auto& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    op.attr(upper.c_str()) = ReduceOp(k);
  }

  py::class_<PyWork, PyWorkPtr>(m, "Work", "The handle of one operation in flight.")
      .def(
          "wait",
          [](PyWork& w, py::handle timeout) {
            const auto ms = toMillis(timeout, "Work.wait");
            bool done = false;
            {
              py::gil_scoped_release unlocked;
              done = w.work->wait(ms);
            }
            drainReleases();
            return done;
          },
          py::arg("timeout") = py::none(),
          "Blocks (without the GIL) until the op finished; raises its error, or commhost.TimeoutError when "
          "`timeout` seconds (default: the op's own deadline) pass first. Returns True.")
      .def("is_completed", [](PyWork& w) { return w.work->isCompleted(); })
      .def(
          "exception", [](PyWork& w) { return exceptionObject(w.work->exception()); },
          "The exception the op failed with (a commhost.Error), or None.")
      .def(
          "abort",
          [](PyWork& w, const std::string& reason) {
            py::gil_scoped_release unlocked;
            w.work->abort(reason);
          },
          py::arg("reason") = "aborted from Python")
      .def_property_readonly(
          "source_rank", [](PyWork& w) { return w.work->sourceRank(); },
          "recv_any_source: the rank the message came from; -1 otherwise.")
      .def_property_readonly("op", [](PyWork& w) { return std::string(opName(w.work->op())); })
      .def_property_readonly("seq", [](PyWork& w) { return w.work->seq(); })
      .def("__repr__", [](PyWork& w) {
        return "<commhost.Work " + std::string(opName(w.work->op())) + " seq " + std::to_string(w.work->seq()) +
               (w.work->isCompleted() ? " completed>" : " in flight>");
      });
}

}  // namespace commhost::python
