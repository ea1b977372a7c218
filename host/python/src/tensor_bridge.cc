// SPDX-License-Identifier: Apache-2.0
// NumPy arrays and __dlpack__ objects as commhost Tensors, without copying.
//
// NumPy arrays go through the buffer protocol rather than their __dlpack__: it carries
// bool and read-only arrays (NumPy refuses to export those through DLPack), and says
// whether the array may be written. Every other object is asked for its __dlpack__()
// capsule and converted by Tensor::fromDLPack, which checks device, dtype and strides.
#include <pybind11/numpy.h>

#include <dlpack/dlpack.h>

#include <mutex>
#include <sstream>

#include "bridge.h"
#include "commhost/errors.h"
#include "commhost/mutex.h"

namespace commhost::python {
namespace {

Mutex gReleaseMutex;
std::vector<std::function<void()>> gReleases GUARDED_BY(gReleaseMutex);
bool gReleaseScheduled GUARDED_BY(gReleaseMutex) = false;

int drainPending(void*) {
  drainReleases();
  return 0;
}

std::string prefix(const char* op, const char* arg) {
  return std::string("commhost ") + op + ": argument '" + arg + "' ";
}

std::string typeName(py::handle obj) { return py::str(py::type::handle_of(obj).attr("__name__")); }

DType numpyDType(const py::array& a, const char* op, const char* arg) {
  const py::dtype dt = a.dtype();
  const char kind = dt.kind();
  const auto size = dt.itemsize();
  // '=' native, '|' not applicable, '<' / '>' explicit (NumPy writes native as '=').
  const char order = dt.byteorder();
  const uint16_t one = 1;
  const bool little = *reinterpret_cast<const uint8_t*>(&one) == 1;
  if ((order == '<' && !little) || (order == '>' && little))
    throw InvalidArgument(prefix(op, arg) + "has non-native byte order (" + std::string(py::str(py::handle(dt))) +
                          "); convert it with x.astype(x.dtype.newbyteorder('='))");
  switch (kind) {
    case 'b': return DType::Bool;
    case 'i':
      if (size == 1) return DType::Int8;
      if (size == 4) return DType::Int32;
      if (size == 8) return DType::Int64;
      break;
    case 'u':
      if (size == 1) return DType::UInt8;
      break;
    case 'f':
      if (size == 2) return DType::Float16;
      if (size == 4) return DType::Float32;
      if (size == 8) return DType::Float64;
      break;
  }
  throw InvalidArgument(prefix(op, arg) + "has dtype " + std::string(py::str(py::handle(dt))) +
                        ", which commhost does not carry; use one of bool, int8, uint8, int32, int64, float16, "
                        "float32, float64 (bfloat16 through a __dlpack__ object such as a torch tensor)");
}

// A reference to a Python object whose release waits for the GIL (see releaseWithGil).
std::shared_ptr<void> keepAlive(py::handle obj) {
  PyObject* raw = obj.ptr();
  Py_INCREF(raw);
  return std::shared_ptr<void>(raw, [](void* p) { releaseWithGil([p] { Py_DECREF(static_cast<PyObject*>(p)); }); });
}

Tensor fromNumpy(const py::array& a, const char* op, const char* arg, bool writable) {
  const DType dtype = numpyDType(a, op, arg);
  if (!(a.flags() & py::array::c_style)) {
    std::ostringstream s;
    s << prefix(op, arg) << "is a non-contiguous numpy array (shape (";
    for (py::ssize_t i = 0; i < a.ndim(); ++i) s << (i ? ", " : "") << a.shape(i);
    s << "), strides (";
    for (py::ssize_t i = 0; i < a.ndim(); ++i) s << (i ? ", " : "") << a.strides(i);
    s << ") bytes); commhost needs C-contiguous memory: pass numpy.ascontiguousarray(x)";
    throw InvalidArgument(s.str());
  }
  if (writable && !a.writeable())
    throw InvalidArgument(prefix(op, arg) + "is a read-only numpy array but " + op +
                          " writes its result into it; pass a writable array (x.copy())");
  if (a.ndim() > Shape::kMaxDims)
    throw InvalidArgument(prefix(op, arg) + "has " + std::to_string(a.ndim()) + " dimensions; commhost takes at most " +
                          std::to_string(Shape::kMaxDims) + ": reshape it");
  Shape shape;
  for (py::ssize_t i = 0; i < a.ndim(); ++i) shape.push(a.shape(i));
  return Tensor::fromBlob(const_cast<void*>(a.data()), shape, dtype, Device::cpu(), keepAlive(a));
}

// The producer's DLManagedTensor behind a proxy whose deleter runs the producer's one
// with the GIL (NumPy's decrefs the array), as Tensor::fromDLPack may drop it anywhere.
DLManagedTensor* deferredDeleter(DLManagedTensor* producer) {
  auto* proxy = new DLManagedTensor{};
  proxy->dl_tensor = producer->dl_tensor;
  proxy->manager_ctx = producer;
  proxy->deleter = [](DLManagedTensor* self) {
    auto* inner = static_cast<DLManagedTensor*>(self->manager_ctx);
    delete self;
    if (inner->deleter) releaseWithGil([inner] { inner->deleter(inner); });
  };
  return proxy;
}

Tensor fromDLPackObject(py::handle obj, const char* op, const char* arg) {
  py::object capsule;
  try {
    capsule = obj.attr("__dlpack__")();
  } catch (py::error_already_set& e) {
    // The exception's type and text, without the traceback e.what() appends.
    throw InvalidArgument(prefix(op, arg) + "(" + typeName(obj) + ") could not be exported: __dlpack__() raised " +
                          std::string(py::str(e.type().attr("__name__"))) + ": " + std::string(py::str(e.value())));
  }
  PyObject* cap = capsule.ptr();
  if (!PyCapsule_IsValid(cap, "dltensor"))
    throw InvalidArgument(prefix(op, arg) + "(" + typeName(obj) +
                          "): __dlpack__() did not return an unused 'dltensor' capsule");
  auto* producer = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(cap, "dltensor"));
  // Consumed: the capsule's destructor must no longer free it (the DLPack protocol).
  PyCapsule_SetName(cap, "used_dltensor");
  PyCapsule_SetDestructor(cap, nullptr);
  // DLPack 0.6 (the host's header) has no bool; newer producers (torch) send code 6.
  const bool isBool = producer->dl_tensor.dtype.code == 6 && producer->dl_tensor.dtype.bits == 8;
  DLManagedTensor* proxy = deferredDeleter(producer);
  if (isBool) proxy->dl_tensor.dtype = DLDataType{kDLUInt, 8, 1};
  Tensor t;
  try {
    t = Tensor::fromDLPack(proxy);  // owns proxy from here, also when it throws
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(prefix(op, arg) + "(" + typeName(obj) + "): " + e.what());
  }
  if (isBool) t = Tensor::fromBlob(t.data(), t.shape(), DType::Bool, t.device(), t.owner());
  return t;
}

}  // namespace

void releaseWithGil(std::function<void()> fn) {
  if (!Py_IsInitialized() || interpreterFinalizing()) return;  // too late: leak rather than crash
  if (PyGILState_Check()) {
    fn();
    return;
  }
  MutexLock lock(&gReleaseMutex);
  gReleases.push_back(std::move(fn));
  // Py_AddPendingCall's queue is small: one call drains everything queued until it runs.
  if (!gReleaseScheduled) gReleaseScheduled = Py_AddPendingCall(drainPending, nullptr) == 0;
}

void drainReleases() {
  std::vector<std::function<void()>> run;
  {
    MutexLock lock(&gReleaseMutex);
    run.swap(gReleases);
    gReleaseScheduled = false;
  }
  for (auto& fn : run) fn();
}

Tensor toTensor(py::handle obj, const char* op, const char* arg, bool writable) {
  drainReleases();  // we hold the GIL: a good moment to finish what backend threads left
  if (py::isinstance<py::array>(obj)) return fromNumpy(py::reinterpret_borrow<py::array>(obj), op, arg, writable);
  if (py::hasattr(obj, "__dlpack__")) return fromDLPackObject(obj, op, arg);
  throw InvalidArgument(prefix(op, arg) + "is a " + typeName(obj) +
                        "; commhost takes numpy arrays and objects with __dlpack__ (torch tensors, cupy arrays, ...)");
}

std::vector<Tensor> toTensors(py::handle seq, const char* op, const char* arg, bool writable) {
  if (!py::isinstance<py::sequence>(seq) || py::isinstance<py::str>(seq) || py::isinstance<py::array>(seq) ||
      py::hasattr(seq, "__dlpack__"))
    throw InvalidArgument(prefix(op, arg) + "must be a list of arrays, not a " + typeName(seq));
  std::vector<Tensor> out;
  const auto items = py::reinterpret_borrow<py::sequence>(seq);
  for (size_t i = 0; i < items.size(); ++i) {
    const std::string name = std::string(arg) + "[" + std::to_string(i) + "]";
    out.push_back(toTensor(items[i], op, name.c_str(), writable));
  }
  return out;
}

std::chrono::milliseconds toMillis(py::handle timeout, const char* what) {
  if (timeout.is_none()) return std::chrono::milliseconds(0);
  double seconds = 0;
  if (py::hasattr(timeout, "total_seconds")) {
    seconds = timeout.attr("total_seconds")().cast<double>();
  } else {
    try {
      seconds = timeout.cast<double>();
    } catch (const py::cast_error&) {
      throw InvalidArgument(std::string("commhost ") + what + ": timeout must be seconds (a number), a " +
                            "datetime.timedelta or None, not a " + typeName(timeout));
    }
  }
  if (!(seconds > 0))
    throw InvalidArgument(std::string("commhost ") + what + ": timeout must be positive (got " +
                          std::to_string(seconds) + " s); pass None for the op's default");
  // Longer than a year (math.inf, sys.maxsize, timedelta.max) is "no limit of mine": one
  // year, which also keeps the deadline arithmetic below far from overflow.
  constexpr double kYear = 365.0 * 24 * 3600;
  return std::chrono::milliseconds(std::max<int64_t>(1, static_cast<int64_t>(std::min(seconds, kYear) * 1000.0 + 0.5)));
}

void registerTensorBridge(py::module_& m) {
  // For tests and debugging: what commhost sees of an array ("f32[4, 2] on cpu").
  m.def(
      "_describe_tensor", [](py::handle obj, bool writable) { return toTensor(obj, "describe", "x", writable).str(); },
      py::arg("x"), py::arg("writable") = false);
  // For tests: the address commhost reads and writes for `x`, to check against the
  // producer's own (numpy's ctypes.data, torch's data_ptr()): equal means no copy.
  m.def(
      "_data_ptr",
      [](py::handle obj) { return reinterpret_cast<uintptr_t>(toTensor(obj, "describe", "x", false).data()); },
      py::arg("x"));
}

}  // namespace commhost::python
