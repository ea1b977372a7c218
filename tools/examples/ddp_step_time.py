# SPDX-License-Identifier: Apache-2.0
"""Per-step time of the DDP toy model of PyTorch's DDP tutorial (Linear(10, 10), ReLU,
Linear(10, 5); SGD; 20 samples per step) over torch.distributed backend BACKEND ("commhost"
or "gloo"), after 200 warmup steps; rank 0 prints "BACKEND N us/step".

Under torch's own launcher (torch 1.13 on Python 3.11 needs --redirects 1 --tee 1: its
default "0" no longer parses) and under `commhost run`, alternating the backends:

    COMMHOST_CONFIG=configs/gloo.yaml python3 -m torch.distributed.run --redirects 1 --tee 1 \\
        --nproc_per_node 2 tools/examples/ddp_step_time.py commhost 2000
    python3 -m torch.distributed.run --redirects 1 --tee 1 --nproc_per_node 2 \\
        tools/examples/ddp_step_time.py gloo 2000
    commhost run -n 2 -c gloo -- python3 tools/examples/ddp_step_time.py commhost 2000
"""
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


def main():
    backend, steps = sys.argv[1], int(sys.argv[2])
    if backend == "commhost":
        import commhost.torch  # noqa: F401  registers the backend
    dist.init_process_group(backend, init_method="env://")
    torch.manual_seed(0)
    ddp = DDP(nn.Sequential(nn.Linear(10, 10), nn.ReLU(), nn.Linear(10, 5)))
    opt = torch.optim.SGD(ddp.parameters(), lr=0.001)
    loss_fn = nn.MSELoss()
    x, y = torch.randn(20, 10), torch.randn(20, 5)

    def step():
        opt.zero_grad()
        loss_fn(ddp(x), y).backward()
        opt.step()

    for _ in range(min(200, steps)):
        step()
    dist.barrier()
    start = time.perf_counter()
    for _ in range(steps):
        step()
    dist.barrier()
    per_step = (time.perf_counter() - start) / steps
    if dist.get_rank() == 0:
        print("%s %.1f us/step" % (backend, per_step * 1e6), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
