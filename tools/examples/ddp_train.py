# SPDX-License-Identifier: Apache-2.0
"""A small model trained with DistributedDataParallel over torch.distributed backend "commhost".

    build/bin/commhost run -n 2 -- /usr/bin/python3 tools/examples/ddp_train.py
    build/bin/commhost run -n 2 -c configs/shm.yaml -- /usr/bin/python3 tools/examples/ddp_train.py

(with PYTHONPATH=build/python, or commhost installed). `commhost run` sets RANK,
WORLD_SIZE, MASTER_ADDR and MASTER_PORT, which is all env:// needs. Ports: torch's
TCPStore (hosted by rank 0) listens on MASTER_PORT; the commhost backend rendezvous
through that torch store and never opens commhost's own store, so nothing else binds the
port and env:// works as is. (A script that also calls commhost.init() for a commhost
group of its own would need a second port: give one of the two stores another, e.g.
init_method="tcp://ADDR:PORT".)

--compare gloo also trains the same model, from the same seed and on the same data, over
a torch gloo group of the same ranks, and asserts that the parameters are identical after
every step at 2 ranks. With more ranks a sum of three or more gradients may be added in
another order than Gloo's ring (shm folds in rank order, hier per host first), which
changes the last bits: there the parameters must agree within --rtol (default 1e-5 above
2 ranks, 0 = identical at 2), and the largest difference is printed.
"""
import argparse
import os
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


def make_model(seed):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 4))


def batches(rank, steps, seed):
    # Each rank its own shard: different data per rank, the same on every run.
    g = torch.Generator().manual_seed(seed * 1000 + rank)
    for _ in range(steps):
        x = torch.randn(16, 32, generator=g)
        yield x, (x[:, :4] * 2).sum(1, keepdim=True).expand(-1, 4).contiguous()


def train(group, rank, steps, seed, bucket_cap_mb=0.01):
    """Trains a fresh model over `group`; yields the parameters after every step."""
    # A small bucket cap splits the gradients into several buckets, so DDP overlaps
    # several allreduces with the backward pass.
    model = DDP(make_model(seed), process_group=group, bucket_cap_mb=bucket_cap_mb)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    for x, y in batches(rank, steps, seed):
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        yield loss.item(), [p.detach().clone() for p in model.parameters()]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--compare", choices=["", "gloo"], default="")
    parser.add_argument("--rtol", type=float, default=None,
                        help="relative tolerance of --compare (default: 0 at 2 ranks, 1e-5 above)")
    args = parser.parse_args()

    import commhost.torch  # noqa: F401  registers backend "commhost"

    dist.init_process_group("commhost", init_method="env://")
    rank, world = dist.get_rank(), dist.get_world_size()
    config = os.environ.get("COMMHOST_CONFIG") or "<embedded default>"
    if rank == 0:
        print("ddp_train: %d ranks on backend commhost (config %s)" % (world, config), flush=True)

    runs = [train(dist.group.WORLD, rank, args.steps, args.seed)]
    if args.compare:
        runs.append(train(dist.new_group(backend=args.compare), rank, args.steps, args.seed))
    rtol = args.rtol if args.rtol is not None else (0.0 if world <= 2 else 1e-5)
    loss, largest = None, 0.0
    for step, results in enumerate(zip(*runs)):
        loss, params = results[0]
        for other_loss, other in results[1:]:
            for i, (a, b) in enumerate(zip(params, other)):
                same = torch.equal(a, b) if rtol == 0 else torch.allclose(a, b, rtol=rtol, atol=rtol * 1e-2)
                largest = max(largest, (a - b).abs().max().item())
                if not same:
                    sys.exit("rank %d step %d: parameter %d differs from %s's by up to %g (rtol %g)"
                             % (rank, step, i, args.compare, (a - b).abs().max().item(), rtol))
            if rtol == 0 and other_loss != loss or abs(other_loss - loss) > rtol * max(1.0, abs(loss)):
                sys.exit("rank %d step %d: loss %r differs from %s's %r" % (rank, step, loss, args.compare, other_loss))
        # DDP keeps replicas equal: check it across ranks too.
        gathered = [torch.zeros_like(params[0]) for _ in range(world)]
        dist.all_gather(gathered, params[0])
        assert all(torch.equal(gathered[0], g) for g in gathered), "rank %d step %d: replicas diverged" % (rank, step)
        if rank == 0 and (step % 10 == 0 or step == args.steps - 1):
            print("step %3d loss %.5f" % (step, loss), flush=True)
    if rank == 0:
        if not args.compare:
            done = ""
        elif rtol == 0:
            done = "; parameters identical to %s's at every step" % args.compare
        else:
            done = "; parameters within rtol %g of %s's at every step (largest difference %.3g)" % (
                rtol, args.compare, largest)
        print("ddp_train: %d steps, final loss %.5f%s" % (args.steps, loss, done), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
