# SPDX-License-Identifier: Apache-2.0
"""torch.distributed figures for one backend, under `commhost run` (env:// init):
allreduce time and busbw per size, and a DDP training step's time.

    build/bin/commhost run -n 2 [-c configs/shm.yaml] -- /usr/bin/python3 tools/examples/torch_bench.py \\
        --backend commhost|gloo [--sizes 64K,1M,16M] [--iters 50] [--ddp-steps 30]

(with PYTHONPATH=build/python). --backend gloo is torch's own gloo over the same ranks,
for comparison; commhost routes by the config `commhost run -c` names. Rank 0 prints
one line per figure: "allreduce SIZE: T us, busbw B GB/s" and "ddp step: T ms".
At one rank with a config that routes to `self`, the allreduce time of 8 bytes is the
bridge's cost per call (torch -> commhost -> backend -> torch future).
"""
import argparse
import statistics
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


def size(text):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    text = text.strip().upper().removesuffix("IB").removesuffix("B")
    return int(text[:-1]) * units[text[-1]] if text[-1] in units else int(text)


def allreduce_us(nbytes, iters):
    t = torch.ones(max(1, nbytes // 4), dtype=torch.float32)
    for _ in range(3):
        dist.all_reduce(t)
    dist.barrier()
    times = []
    for _ in range(iters):
        start = time.perf_counter()
        dist.all_reduce(t)
        times.append(time.perf_counter() - start)
    return statistics.mean(times) * 1e6, statistics.median(times) * 1e6


def ddp_step_ms(steps):
    torch.manual_seed(0)
    model = DDP(nn.Sequential(*[nn.Sequential(nn.Linear(512, 512), nn.ReLU()) for _ in range(4)], nn.Linear(512, 8)))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(64, 512), torch.randn(64, 8)
    times = []
    for step in range(steps + 3):
        start = time.perf_counter()
        opt.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
        opt.step()
        if step >= 3:  # the first steps build buckets
            times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--backend", choices=["commhost", "gloo"], default="commhost")
    p.add_argument("--sizes", default="64K,1M,16M")
    p.add_argument("--iters", type=int, default=50)
    p.add_argument("--ddp-steps", type=int, default=30, help="0: no DDP figure")
    a = p.parse_args()
    if a.backend == "commhost":
        import commhost.torch  # noqa: F401  registers the backend
    torch.set_num_threads(1)
    dist.init_process_group(a.backend)
    world, rank = dist.get_world_size(), dist.get_rank()
    for nbytes in (size(s) for s in a.sizes.split(",")):
        mean, median = allreduce_us(nbytes, a.iters)
        busbw = nbytes / (mean * 1e-6) / 1e9 * (2 * (world - 1) / world if world > 1 else 1)
        if rank == 0:
            print(f"{a.backend} {world} ranks: allreduce {nbytes} B: {mean:.1f} us (median {median:.1f}), "
                  f"busbw {busbw:.3f} GB/s", flush=True)
    if a.ddp_steps:
        step = ddp_step_ms(a.ddp_steps)
        if rank == 0:
            print(f"{a.backend} {world} ranks: ddp step: {step:.2f} ms (median of {a.ddp_steps})", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
