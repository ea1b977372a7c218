#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""tools/compare-peers' parsing, without running anything: the peers' table rows (time
from whichever column was printed with the finer relative step) and --build-variant's
argument.
    compare_peers_test.py <source dir>"""
import importlib.machinery
import importlib.util
import os
import sys

path = os.path.join(sys.argv[1], "tools", "compare-peers")
loader = importlib.machinery.SourceFileLoader("compare_peers", path)
spec = importlib.util.spec_from_loader("compare_peers", loader)
cp = importlib.util.module_from_spec(spec)
loader.exec_module(cp)

# Open MPI's 8 B prints as 0.3 us; its algbw 0.032 GB/s says 0.25 us. Large sizes keep the
# time column (six digits against algbw's four); a zero algbw never wins.
rows = cp.table_rows("# size time algbw busbw\n"
                     "         8          0.3    0.032    0.032\n"
                     "      1024          0.5    2.048    2.048\n"
                     "  67108864      34819.0    1.927    1.927\n"
                     "         4          0.2    0.000    0.000\n")
assert rows[8] == 0.25, rows
assert abs(rows[1024] - 0.5) < 1e-12, rows
assert rows[67108864] == 34819.0, rows
assert rows[4] == 0.2, rows

sys.argv = ["compare-peers", "--build-variant", "old:/tmp/b:configs/shm.yaml", "--rounds", "2"]
a = cp.parse_args()
assert a.build_variant == [("old", "/tmp/b", "configs/shm.yaml")], a.build_variant
print("compare_peers: OK")
