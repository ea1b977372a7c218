// SPDX-License-Identifier: Apache-2.0
// commhost::Error and its subclasses as Python exceptions, with the same message text.
//
// commhost.Error derives from RuntimeError; each subclass also derives from the builtin
// that Python code would catch for it (commhost.TimeoutError is a TimeoutError,
// commhost.InvalidArgument a ValueError, commhost.NotSupportedError a
// NotImplementedError). Every instance carries the C++ error's context as attributes:
// code, group, rank, op, seq, peer, key (None where unset).
#include "commhost/errors.h"
#include "bridge.h"

namespace commhost::python {
namespace {

struct ErrorClass {
  ErrorCode code;
  const char* name;
  const char* builtin;  // an extra builtin base, or null
  const char* doc;
};
constexpr ErrorClass kClasses[] = {
    {ErrorCode::Config, "ConfigError", nullptr, "The configuration is invalid (the message names file:line)."},
    {ErrorCode::Plugin, "PluginError", nullptr, "A plugin could not be loaded or refused its options."},
    {ErrorCode::Store, "StoreError", nullptr, "The store failed or a key operation failed."},
    {ErrorCode::Timeout, "TimeoutError", "TimeoutError", "An operation ran past its deadline."},
    {ErrorCode::Aborted, "AbortedError", nullptr, "The work or its backend was aborted."},
    {ErrorCode::PeerLost, "PeerLostError", nullptr, "A peer died or went silent."},
    {ErrorCode::InvalidArgument, "InvalidArgument", "ValueError", "The caller passed something wrong."},
    {ErrorCode::Backend, "BackendError", nullptr, "The backend failed."},
    {ErrorCode::NotSupported, "NotSupportedError", "NotImplementedError", "The backend does not implement the op."},
};
constexpr int kNumClasses = sizeof(kClasses) / sizeof(kClasses[0]);

// Owned by the module (kept alive by its attributes); borrowed here.
PyObject* gBase = nullptr;
PyObject* gClasses[kNumClasses] = {};

PyObject* classFor(ErrorCode code) {
  for (int i = 0; i < kNumClasses; ++i)
    if (kClasses[i].code == code) return gClasses[i];
  return gBase;
}

py::object orNone(const std::string& s) { return s.empty() ? py::object(py::none()) : py::object(py::str(s)); }
py::object orNone(int v) { return v < 0 ? py::object(py::none()) : py::object(py::int_(v)); }

py::object makeError(const Error& e) {
  py::object instance = py::reinterpret_borrow<py::object>(classFor(e.code()))(py::str(e.what()));
  const ErrorContext& w = e.where();
  instance.attr("code") = errorCodeName(e.code());
  instance.attr("group") = orNone(w.group);
  instance.attr("rank") = orNone(w.rank);
  instance.attr("op") = w.op ? py::object(py::str(w.op)) : py::object(py::none());
  instance.attr("seq") = w.seq ? py::object(py::int_(w.seq)) : py::object(py::none());
  instance.attr("peer") = orNone(w.peer);
  instance.attr("key") = orNone(w.key);
  return instance;
}

}  // namespace

py::object exceptionObject(std::exception_ptr error) {
  if (!error) return py::none();
  try {
    std::rethrow_exception(error);
  } catch (const Error& e) {
    return makeError(e);
  } catch (const std::exception& e) {
    return py::reinterpret_borrow<py::object>(PyExc_RuntimeError)(py::str(e.what()));
  } catch (...) {
    return py::reinterpret_borrow<py::object>(PyExc_RuntimeError)(py::str("unknown C++ exception"));
  }
}

void registerErrors(py::module_& m) {
  // Named after the package the user imports, not the extension module.
  const std::string qual = "commhost.";
  gBase = PyErr_NewExceptionWithDoc((qual + "Error").c_str(),
                                    "Every error commhost raises: a RuntimeError with the C++ error's context "
                                    "(code, group, rank, op, seq, peer, key).",
                                    PyExc_RuntimeError, nullptr);
  if (!gBase) throw py::error_already_set();
  m.attr("Error") = py::reinterpret_steal<py::object>(gBase);
  for (int i = 0; i < kNumClasses; ++i) {
    const ErrorClass& c = kClasses[i];
    py::tuple bases = c.builtin ? py::make_tuple(py::handle(gBase), py::module_::import("builtins").attr(c.builtin))
                                : py::make_tuple(py::handle(gBase));
    PyObject* cls = PyErr_NewExceptionWithDoc((qual + c.name).c_str(), c.doc, bases.ptr(), nullptr);
    if (!cls) throw py::error_already_set();
    m.attr(c.name) = py::reinterpret_steal<py::object>(cls);
    gClasses[i] = cls;
  }
  py::register_exception_translator([](std::exception_ptr p) {
    if (!p) return;
    try {
      std::rethrow_exception(p);
    } catch (const Error& e) {
      py::object instance = makeError(e);
      PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(instance.ptr())), instance.ptr());
    }
  });
}

}  // namespace commhost::python
