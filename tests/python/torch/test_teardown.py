# SPDX-License-Identifier: Apache-2.0
"""Destroying a commhost process group while one of its ops is still in flight.

Rank 0 posts a receive, drops every Python reference to its tensor and its Work, and
destroys the group at once; rank 1 sends only later. Destroying the group waits for the
receive, which completes on a commhost backend thread; that thread then drops the last
reference to the tensor, and a tensor whose Python object torch kept alive needs the GIL
to die. torch destroys backends while holding the GIL (destroy_process_group clears its
registry with it held), so a backend that kept the GIL while it waited would never end:
this test then hangs until its job limit. Stop 53's CI hang (test_ops, Debian 13).
"""
import os
import sys
import time
import warnings

import torch
import torch.distributed as dist

warnings.filterwarnings("ignore", message=".*(private function|will be deprecated).*")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _launch import launch_or_run  # noqa: E402


def worker(args):
    import commhost.torch  # registers backend "commhost"

    dist.init_process_group("commhost", init_method="env://")
    rank = dist.get_rank()
    dist.barrier()
    if rank == 0:
        t = torch.zeros(4)
        work = dist.irecv(t, src=1, tag=7)
        del work, t  # commhost now holds the tensor's last references
        started = time.monotonic()
        dist.destroy_process_group()
        waited = time.monotonic() - started
        # The destroy waited for the receive (rank 1 sends 1.5 s after the barrier).
        assert waited > 0.5, "rank 0: destroy returned after %.2f s, before the receive completed" % waited
        print("rank 0: destroyed the group with a receive in flight (waited %.2f s)" % waited, flush=True)
    else:
        time.sleep(1.5)
        dist.send(torch.full((4,), 3.0), dst=0, tag=7)
        dist.destroy_process_group()
        print("rank 1: sent, destroyed", flush=True)


if __name__ == "__main__":
    launch_or_run(worker, __file__)
