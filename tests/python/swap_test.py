# SPDX-License-Identifier: Apache-2.0
"""Hot swap from Python under `commhost run`: gloo -> shm mid-run with results still
right, a refused swap (only_if_shadow_agrees with no shadow data), a config error that
leaves the group as it was, then a shadowed route whose agreement lets the swap through.
At 2 and 3 ranks. Run by ctest; launches itself per rank."""
import numpy as np

import harness
from harness import CONFIGS, expect_raises

import commhost

SHADOWED = """\
group: { name: main, timeout: 30s }
store: { plugin: tcp, options: { serve: auto } }
backends:
  gloo: { plugin: gloo, options: { threads: 1, contexts: 2, device: "", allreduce_algorithm: ring, ring_threshold: 256KiB } }
  shm: { plugin: shm }
routes:
  - { device: cpu, backend: gloo, shadow: shm, sample: 1.0 }
"""


def step(pg, k):
    """A few ops whose results depend on the step and the rank; asserts them."""
    r, n = pg.rank, pg.size
    x = np.arange(1000, dtype=np.float32) + r + k
    pg.allreduce(x).wait()
    assert np.array_equal(x, n * (np.arange(1000, dtype=np.float32) + k) + n * (n - 1) / 2), k
    out = np.empty(n * 300, np.int64)
    pg.allgather_into_tensor(out, np.full(300, 10 * r + k, np.int64)).wait()
    assert np.array_equal(out.reshape(n, 300)[:, 0], 10 * np.arange(n) + k)
    b = np.full(64 * 1024, k if r == 0 else -1, np.int32)
    pg.broadcast(b, root=0).wait()
    assert (b == k).all()
    y = np.empty(3, np.float64)
    w = pg.send(np.full(3, r + 0.5), (r + 1) % n)
    pg.recv(y, (r - 1) % n).wait()
    w.wait()
    assert (y == (r - 1) % n + 0.5).all()
    pg.sync_point()


def worker(pg, args):
    assert pg.generation == 0 and "shm" not in pg.routes
    for k in range(3):
        step(pg, k)

    # shm never ran as a shadow here: refused on every rank, nothing changes.
    e = expect_raises(commhost.ConfigError, lambda: pg.reconfigure(CONFIGS / "shm.yaml", only_if_shadow_agrees=True),
                      "never ran as a shadow")
    assert pg.generation == 0
    step(pg, 3)

    # An invalid config fails while loading, on every rank alike, before any swap.
    e = expect_raises(commhost.ConfigError, lambda: pg.reconfigure("group: { name: main }\nroutes: 7\n"), "<python>")
    assert e.code == "config" and pg.generation == 0
    step(pg, 4)

    report = pg.reconfigure(str(CONFIGS / "shm.yaml"))
    assert report["generation"] == 1 and pg.generation == 1, report
    assert "shm" in report["built"] and "gloo" in report["kept"], report
    assert report["seconds"]["total"] > 0
    assert "shm" in pg.routes and pg.config_source.endswith("shm.yaml")
    for k in range(5, 9):
        step(pg, k)

    # Back to gloo with shm as a shadow of every allreduce/broadcast/allgather_into_tensor.
    report = pg.reconfigure(SHADOWED)
    assert pg.generation == 2
    for k in range(9, 12):
        step(pg, k)
    shadows = pg.shadow_report(wait=30)
    assert shadows, "expected shadow records"
    for s in shadows:
        assert s["backend"] == "gloo" and s["shadow"] == "shm" and s["samples"] > 0, s
        assert s["disagreed"] == 0 and s["failed"] == 0, s
    assert {s["op"] for s in shadows} >= {"allreduce", "broadcast"}, shadows
    report = pg.reconfigure(CONFIGS / "shm.yaml", only_if_shadow_agrees=True)
    assert pg.generation == 3, report
    step(pg, 12)
    fr = pg.flight_recorder()
    assert len(fr["swaps"]) >= 3, fr["swaps"]
    assert fr["shadows"], "flight recorder without shadow events"
    assert pg.sync_status()["count"] == 13


if __name__ == "__main__":
    harness.main(worker, [(2, CONFIGS / "gloo.yaml"), (3, CONFIGS / "gloo.yaml")])
