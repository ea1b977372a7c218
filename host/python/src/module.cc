// SPDX-License-Identifier: Apache-2.0
// commhost._C: the Python surface of libcommhost (see commhost/__init__.py).
#include <pybind11/pybind11.h>

#include "commhost/version.h"

namespace py = pybind11;

PYBIND11_MODULE(_C, m) {
  m.doc() = "commhost: collective communication host (native part)";
  m.attr("__version__") = COMMHOST_VERSION;
}
