// SPDX-License-Identifier: Apache-2.0
// commhost.ProcessGroup: every collective and point-to-point op of the C++ API, on NumPy
// arrays and __dlpack__ objects. Each returns a Work; ops write their results into the
// arrays passed (allreduce, broadcast, ... in place; gathers into the outputs).
#include <pybind11/stl.h>

#include "group.h"

namespace commhost::python {

using py::arg;

namespace {

py::arg_v timeoutArg() { return py::arg("timeout") = py::none(); }

bool isNone(py::handle h) { return h.is_none(); }

// Gather's outputs and scatter's inputs matter on the root only; other ranks may pass None.
std::vector<Tensor> rootList(py::handle seq, const char* op, const char* name, bool writable) {
  return isNone(seq) ? std::vector<Tensor>{} : toTensors(seq, op, name, writable);
}

std::vector<Tensor> concat(std::vector<Tensor> a, const std::vector<Tensor>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

std::vector<int64_t> splits(py::handle h) {
  return isNone(h) ? std::vector<int64_t>{} : h.cast<std::vector<int64_t>>();
}

}  // namespace

void defineCollectives(PyGroupClass& cls) {
  cls.def(
         "allreduce",
         [](const PyGroup& g, py::handle x, py::handle op, py::handle timeout) {
           Tensor t = toTensor(x, "allreduce", "tensor", true);
           AllreduceOptions o;
           o.reduceOp = toReduceOp(op);
           o.timeout = toMillis(timeout, "allreduce");
           return issue(g, {t}, [&](ProcessGroup& pg) { return pg.allreduce(t, o); });
         },
         arg("tensor"), arg("op") = "sum", timeoutArg(), "Reduces `tensor` across the group, in place.")
      .def(
          "allreduce_coalesced",
          [](const PyGroup& g, py::handle xs, py::handle op, py::handle timeout) {
            auto ts = toTensors(xs, "allreduce_coalesced", "tensors", true);
            AllreduceCoalescedOptions o;
            o.reduceOp = toReduceOp(op);
            o.timeout = toMillis(timeout, "allreduce_coalesced");
            return issue(g, ts, [&](ProcessGroup& pg) { return pg.allreduceCoalesced(ts, o); });
          },
          arg("tensors"), arg("op") = "sum", timeoutArg())
      .def(
          "broadcast",
          [](const PyGroup& g, py::handle x, int root, py::handle timeout) {
            Tensor t = toTensor(x, "broadcast", "tensor", g.group().rank() != root);
            BroadcastOptions o;
            o.root = root;
            o.timeout = toMillis(timeout, "broadcast");
            return issue(g, {t}, [&](ProcessGroup& pg) { return pg.broadcast(t, o); });
          },
          arg("tensor"), arg("root") = 0, timeoutArg(), "Copies the root's `tensor` into every rank's, in place.")
      .def(
          "reduce",
          [](const PyGroup& g, py::handle x, int root, py::handle op, py::handle timeout) {
            Tensor t = toTensor(x, "reduce", "tensor", true);
            ReduceOptions o;
            o.root = root;
            o.reduceOp = toReduceOp(op);
            o.timeout = toMillis(timeout, "reduce");
            return issue(g, {t}, [&](ProcessGroup& pg) { return pg.reduce(t, o); });
          },
          arg("tensor"), arg("root") = 0, arg("op") = "sum", timeoutArg(), "Reduces into the root's `tensor`.")
      .def(
          "allgather",
          [](const PyGroup& g, py::handle outs, py::handle x, py::handle timeout) {
            auto os = toTensors(outs, "allgather", "outputs", true);
            Tensor in = toTensor(x, "allgather", "input", false);
            AllgatherOptions o;
            o.timeout = toMillis(timeout, "allgather");
            return issue(g, concat(os, {in}), [&](ProcessGroup& pg) { return pg.allgather(os, in, o); });
          },
          arg("outputs"), arg("input"), timeoutArg(), "outputs[r] receives rank r's `input`.")
      .def(
          "allgather_into_tensor",
          [](const PyGroup& g, py::handle out, py::handle x, py::handle timeout) {
            Tensor ot = toTensor(out, "allgather_into_tensor", "output", true);
            Tensor in = toTensor(x, "allgather_into_tensor", "input", false);
            AllgatherOptions o;
            o.timeout = toMillis(timeout, "allgather_into_tensor");
            return issue(g, {ot, in}, [&](ProcessGroup& pg) { return pg.allgatherIntoTensor(ot, in, o); });
          },
          arg("output"), arg("input"), timeoutArg(), "`output` (size x input) receives every rank's `input` in order.")
      .def(
          "allgather_coalesced",
          [](const PyGroup& g, py::handle outs, py::handle xs, py::handle timeout) {
            std::vector<std::vector<Tensor>> os;
            std::vector<Tensor> keep;
            if (!py::isinstance<py::sequence>(outs))
              throw InvalidArgument(
                  "commhost allgather_coalesced: 'outputs' must be a list (one per input) of lists (one per rank)");
            for (auto row : py::reinterpret_borrow<py::sequence>(outs)) {
              os.push_back(toTensors(row, "allgather_coalesced", "outputs[r]", true));
              keep = concat(keep, os.back());
            }
            auto ins = toTensors(xs, "allgather_coalesced", "inputs", false);
            AllgatherOptions o;
            o.timeout = toMillis(timeout, "allgather_coalesced");
            return issue(g, concat(keep, ins), [&](ProcessGroup& pg) { return pg.allgatherCoalesced(os, ins, o); });
          },
          arg("outputs"), arg("inputs"), timeoutArg(), "outputs[i][r] receives rank r's inputs[i].")
      .def(
          "gather",
          [](const PyGroup& g, py::handle outs, py::handle x, int root, py::handle timeout) {
            auto os = rootList(outs, "gather", "outputs", true);
            Tensor in = toTensor(x, "gather", "input", false);
            GatherOptions o;
            o.root = root;
            o.timeout = toMillis(timeout, "gather");
            return issue(g, concat(os, {in}), [&](ProcessGroup& pg) { return pg.gather(os, in, o); });
          },
          arg("outputs"), arg("input"), arg("root") = 0, timeoutArg(),
          "On the root, outputs[r] receives rank r's `input`; other ranks pass None (or []).")
      .def(
          "scatter",
          [](const PyGroup& g, py::handle out, py::handle xs, int root, py::handle timeout) {
            Tensor ot = toTensor(out, "scatter", "output", true);
            auto ins = rootList(xs, "scatter", "inputs", false);
            ScatterOptions o;
            o.root = root;
            o.timeout = toMillis(timeout, "scatter");
            return issue(g, concat({ot}, ins), [&](ProcessGroup& pg) { return pg.scatter(ot, ins, o); });
          },
          arg("output"), arg("inputs"), arg("root") = 0, timeoutArg(),
          "Rank r's `output` receives the root's inputs[r]; other ranks pass None (or []) as inputs.")
      .def(
          "reduce_scatter",
          [](const PyGroup& g, py::handle out, py::handle xs, py::handle op, py::handle timeout) {
            Tensor ot = toTensor(out, "reduce_scatter", "output", true);
            auto ins = toTensors(xs, "reduce_scatter", "inputs", false);
            ReduceScatterOptions o;
            o.reduceOp = toReduceOp(op);
            o.timeout = toMillis(timeout, "reduce_scatter");
            return issue(g, concat({ot}, ins), [&](ProcessGroup& pg) { return pg.reduceScatter(ot, ins, o); });
          },
          arg("output"), arg("inputs"), arg("op") = "sum", timeoutArg(),
          "Rank r's `output` receives the reduction of every rank's inputs[r].")
      .def(
          "reduce_scatter_tensor",
          [](const PyGroup& g, py::handle out, py::handle x, py::handle op, py::handle timeout) {
            Tensor ot = toTensor(out, "reduce_scatter_tensor", "output", true);
            Tensor in = toTensor(x, "reduce_scatter_tensor", "input", false);
            ReduceScatterOptions o;
            o.reduceOp = toReduceOp(op);
            o.timeout = toMillis(timeout, "reduce_scatter_tensor");
            return issue(g, {ot, in}, [&](ProcessGroup& pg) { return pg.reduceScatterTensor(ot, in, o); });
          },
          arg("output"), arg("input"), arg("op") = "sum", timeoutArg())
      .def(
          "alltoall",
          [](const PyGroup& g, py::handle outs, py::handle xs, py::handle timeout) {
            auto os = toTensors(outs, "alltoall", "outputs", true);
            auto ins = toTensors(xs, "alltoall", "inputs", false);
            AlltoallOptions o;
            o.timeout = toMillis(timeout, "alltoall");
            return issue(g, concat(os, ins), [&](ProcessGroup& pg) { return pg.alltoall(os, ins, o); });
          },
          arg("outputs"), arg("inputs"), timeoutArg(), "outputs[r] receives rank r's inputs[this rank].")
      .def(
          "alltoall_single",
          [](const PyGroup& g, py::handle out, py::handle x, py::handle outSplits, py::handle inSplits,
             py::handle timeout) {
            Tensor ot = toTensor(out, "alltoall_single", "output", true);
            Tensor in = toTensor(x, "alltoall_single", "input", false);
            AlltoallSingleOptions o;
            o.outputSplitSizes = splits(outSplits);
            o.inputSplitSizes = splits(inSplits);
            o.timeout = toMillis(timeout, "alltoall_single");
            return issue(g, {ot, in}, [&](ProcessGroup& pg) { return pg.alltoallSingle(ot, in, o); });
          },
          arg("output"), arg("input"), arg("output_split_sizes") = py::none(), arg("input_split_sizes") = py::none(),
          timeoutArg(), "Split sizes count rows of dimension 0; None: equal splits.")
      .def(
          "barrier",
          [](const PyGroup& g, py::handle timeout) {
            BarrierOptions o;
            o.timeout = toMillis(timeout, "barrier");
            return issue(g, {}, [&](ProcessGroup& pg) { return pg.barrier(o); });
          },
          timeoutArg())
      .def(
          "monitored_barrier",
          [](const PyGroup& g, py::handle timeout, bool waitAll) {
            MonitoredBarrierOptions o;
            o.timeout = toMillis(timeout, "monitored_barrier");
            o.waitAllRanks = waitAll;
            inTurn(g, [&](ProcessGroup& pg) { pg.monitoredBarrier(o); });
          },
          timeoutArg(), arg("wait_all_ranks") = false,
          "Blocks until every rank arrives; raises commhost.TimeoutError naming the ranks that did not.")
      .def(
          "send",
          [](const PyGroup& g, py::handle x, int dst, int tag, py::handle timeout) {
            Tensor t = toTensor(x, "send", "tensor", false);
            SendOptions o;
            o.tag = tag;
            o.timeout = toMillis(timeout, "send");
            return issue(g, {t}, [&](ProcessGroup& pg) { return pg.send(t, dst, o); });
          },
          arg("tensor"), arg("dst"), arg("tag") = 0, timeoutArg())
      .def(
          "recv",
          [](const PyGroup& g, py::handle x, int src, int tag, py::handle timeout) {
            Tensor t = toTensor(x, "recv", "tensor", true);
            RecvOptions o;
            o.tag = tag;
            o.timeout = toMillis(timeout, "recv");
            return issue(g, {t}, [&](ProcessGroup& pg) { return pg.recv(t, src, o); });
          },
          arg("tensor"), arg("src"), arg("tag") = 0, timeoutArg())
      .def(
          "recv_any_source",
          [](const PyGroup& g, py::handle x, int tag, py::handle timeout) {
            Tensor t = toTensor(x, "recv_any_source", "tensor", true);
            RecvOptions o;
            o.tag = tag;
            o.timeout = toMillis(timeout, "recv_any_source");
            return issue(g, {t}, [&](ProcessGroup& pg) { return pg.recvAnySource(t, o); });
          },
          arg("tensor"), arg("tag") = 0, timeoutArg(), "Work.source_rank says who sent it.");
}

void registerGroup(py::module_& m) {
  PyGroupClass cls(m, "ProcessGroup",
                   "A group of ranks and its collectives (commhost.init() gives the world group). Calls on one "
                   "group come from one thread at a time, in the same order on every rank.");
  defineCollectives(cls);
  defineAdmin(cls);
}

}  // namespace commhost::python
