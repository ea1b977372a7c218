// SPDX-License-Identifier: Apache-2.0
// commhost._torch: torch.distributed backend "commhost" (a c10d::ProcessGroup subclass).
#include <torch/python.h>

PYBIND11_MODULE(_torch, m) { m.doc() = "commhost torch.distributed backend (native part)"; }
