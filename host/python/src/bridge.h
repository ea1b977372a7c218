// SPDX-License-Identifier: Apache-2.0
// What the files of commhost._C share: the tensor bridge (NumPy arrays and __dlpack__
// objects as commhost Tensors), the error mapping and each file's registration function.
#pragma once

#include <pybind11/pybind11.h>

#include <chrono>
#include <exception>
#include <functional>
#include <string>
#include <vector>

#include "commhost/tensor.h"
#include "commhost/types.h"

namespace commhost::python {

namespace py = pybind11;

// Whether the interpreter is shutting down (objects may no longer be touched). Python 3.13
// made the check public as Py_IsFinalizing and dropped the private _Py_IsFinalizing.
inline bool interpreterFinalizing() {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsFinalizing() != 0;
#else
  return _Py_IsFinalizing() != 0;
#endif
}

// --- tensor_bridge.cc ---
// A view of `obj`'s memory (zero copy): a NumPy array through the buffer protocol, any
// other object through its __dlpack__(). The Tensor keeps `obj` alive; its last copy may
// go away on a backend thread, so the release of the Python reference is deferred to a
// thread holding the GIL (see releaseWithGil). `op` and `arg` name the call and argument
// in errors; `writable`: the op writes into it (a read-only NumPy array is refused).
// Throws InvalidArgument for a non-contiguous array or a dtype commhost does not carry.
Tensor toTensor(py::handle obj, const char* op, const char* arg, bool writable);
// A Python sequence of arrays, each as toTensor.
std::vector<Tensor> toTensors(py::handle seq, const char* op, const char* arg, bool writable);
// Runs `fn` (which touches Python objects) now when this thread holds the GIL, else queues
// it for the main thread (Py_AddPendingCall), never blocking the caller: backend threads
// drop the last Tensor copies and must not wait for the GIL. Leaks once Python finalizes.
void releaseWithGil(std::function<void()> fn);
// Runs what releaseWithGil queued; the GIL must be held.
void drainReleases();
// None -> 0 ("the op's default"), seconds as a number, or a datetime.timedelta.
std::chrono::milliseconds toMillis(py::handle timeout, const char* what);
void registerTensorBridge(py::module_& m);

// --- errors.cc ---
// Registers commhost.Error and its subclasses (ConfigError, TimeoutError, ...) and the
// translator that raises them for commhost::Error with the same message.
void registerErrors(py::module_& m);
// The Python exception instance for a caught exception (None for a null pointer).
py::object exceptionObject(std::exception_ptr error);

// --- group.cc / work.cc / tools.cc ---
void registerWork(py::module_& m);
void registerGroup(py::module_& m);
void registerTools(py::module_& m);

}  // namespace commhost::python
