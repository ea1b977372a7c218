# SPDX-License-Identifier: Apache-2.0
"""DDP step time with 100 MB of dense gradients (EmbeddingBag(1_000_000, 25), float32, small
batch) over backend BACKEND: "commhost", "gloo" (torch's own), or one of two floors:
- "none", the compute floor: the same model and steps in every rank with no DDP and no
  communication at all, so the ranks still share the cores as in the others;
- "ddp-nocomm", DDP's own floor: DDP (on gloo) with a comm hook that sends nothing, so each
  step pays DDP's bucketing and gradient copies but no allreduce. No backend under an
  unchanged DDP script can be faster than this.
Rank 0 prints "BACKEND median S s/step (min S)".

    commhost run -n 4 -c shm -- python3 tools/examples/ddp_dense_step.py commhost 10
    commhost run -n 4 -- python3 tools/examples/ddp_dense_step.py gloo 10
    commhost run -n 4 -- python3 tools/examples/ddp_dense_step.py none 10
    commhost run -n 4 -- python3 tools/examples/ddp_dense_step.py ddp-nocomm 10

Alternate the three in rounds; on Debian 13 (torch 2.6) export USE_LIBUV=0 first.
"""
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


def no_communication(state, bucket):
    """A DDP comm hook that hands the bucket back as it is: no allreduce, no division."""
    fut = torch.futures.Future()
    fut.set_result(bucket.buffer())
    return fut


def main():
    backend, steps = sys.argv[1], int(sys.argv[2])
    if backend == "commhost":
        import commhost.torch  # noqa: F401  registers the backend
    torch.manual_seed(0)
    model = nn.EmbeddingBag(1_000_000, 25, mode="sum", sparse=False)
    if backend != "none":
        dist.init_process_group("gloo" if backend == "ddp-nocomm" else backend, init_method="env://")
        model = DDP(model)
        if backend == "ddp-nocomm":
            model.register_comm_hook(None, no_communication)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    inputs = torch.randint(0, 1_000_000, (32, 8))
    target = torch.randn(32, 25)

    def step():
        opt.zero_grad()
        nn.functional.mse_loss(model(inputs), target).backward()
        opt.step()

    times = []
    for i in range(steps + 2):  # two warmup steps
        if backend != "none":
            dist.barrier()
        start = time.perf_counter()
        step()
        if i >= 2:
            times.append(time.perf_counter() - start)
    rank = dist.get_rank() if backend != "none" else int(os.environ.get("RANK", "0"))
    if rank == 0:
        print("%s median %.3f s/step (min %.3f)" % (backend, statistics.median(times), min(times)), flush=True)
    if backend != "none":
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
