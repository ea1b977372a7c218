// SPDX-License-Identifier: Apache-2.0
// commhost._C: the Python surface of libcommhost (see commhost/__init__.py). Each part
// lives in its own file: errors.cc, tensor_bridge.cc, work.cc, group.cc, group_admin.cc,
// tools.cc.
#include "bridge.h"
#include "commhost/version.h"

PYBIND11_MODULE(_C, m) {
  namespace chp = commhost::python;
  m.doc() = "commhost: collective communication host (native part)";
  m.attr("__version__") = COMMHOST_VERSION;
  chp::registerErrors(m);
  chp::registerTensorBridge(m);
  chp::registerWork(m);
  chp::registerGroup(m);
  chp::registerTools(m);
}
