# SPDX-License-Identifier: Apache-2.0
"""Elastic membership from Python under `commhost run` (supervisor.on_peer_loss: shrink):
at 3 ranks, rank 1 kills itself (SIGKILL) in the middle of a loop of allreduces; the
survivors' op raises, pg.shrink() renumbers them to ranks 0 and 1 of 2, and the loop goes
on with right results. On gloo and shm. Run by ctest; launches itself per rank."""
import os
import signal
import sys

import numpy as np

import harness
from harness import CONFIGS

import commhost

ELASTIC = ["supervisor.on_peer_loss=shrink", "supervisor.heartbeat.interval=100ms", "supervisor.heartbeat.timeout=2s"]


def checked_allreduce(pg, k):
    x = np.full(4096, pg.rank + k, np.float32)
    pg.allreduce(x).wait()
    n = pg.size
    assert (x == n * (n - 1) / 2 + n * k).all(), (k, x[:4])


def worker(pg, args):
    assert pg.size == 3
    global_rank = pg.global_ranks[pg.rank]
    shrunk = None
    k = 0
    while k < 60:
        if k == 20 and global_rank == 1:
            os.kill(os.getpid(), signal.SIGKILL)
        try:
            checked_allreduce(pg, k)
        except (commhost.PeerLostError, commhost.AbortedError) as e:
            assert shrunk is None, f"a second failure: {e}"
            assert "peer 1 lost" in str(e), e
            shrunk = pg.shrink()
            continue  # the failed op again, on the ranks left
        k += 1
    assert shrunk is not None, "rank 1's loss was never seen"
    assert shrunk["size"] == 2 and pg.size == 2, shrunk
    assert shrunk["old_ranks"] == [0, 2] and shrunk["removed"] == [1], shrunk
    assert pg.rank == (0 if global_rank == 0 else 1) and pg.generation == 1, (pg.rank, pg.generation)
    assert set(shrunk["seconds"]) == {"agree", "build", "confirm", "commit", "total"}, shrunk


if __name__ == "__main__":
    if "--worker" in sys.argv:
        harness.main(worker, [])
    else:
        for config in ("gloo.yaml", "shm.yaml"):
            out = harness.launch(sys.argv[0], 3, CONFIGS / config, sets=ELASTIC, passes=[0, 1])
            assert "rank 1 failed (signal 9 (Killed))" in out, out
        print("all runs passed")
