# SPDX-License-Identifier: Apache-2.0
"""Object collectives and new_group on backend "commhost", world 2, real processes."""
import os
import sys

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _launch import launch_or_run  # noqa: E402


def test_objects(rank, world):
    mine = {"rank": rank, "text": "x" * (10 + 1000 * rank), "list": list(range(rank + 2))}
    gathered = [None] * world
    dist.all_gather_object(gathered, mine)
    for r in range(world):
        assert gathered[r] == {"rank": r, "text": "x" * (10 + 1000 * r), "list": list(range(r + 2))}, gathered[r]

    objs = [{"from": 1, "tensor": torch.arange(3)}, "second", 3.5] if rank == 1 else [None, None, None]
    dist.broadcast_object_list(objs, src=1)
    assert objs[0]["from"] == 1 and torch.equal(objs[0]["tensor"], torch.arange(3)), objs
    assert objs[1:] == ["second", 3.5], objs

    out = [None] * world if rank == 0 else None
    dist.gather_object(("g", rank), out, dst=0)
    if rank == 0:
        assert out == [("g", r) for r in range(world)], out

    got = [None]
    dist.scatter_object_list(got, [("s", r) for r in range(world)] if rank == 1 else None, src=1)
    assert got[0] == ("s", rank), got


def test_new_group(rank, world):
    both = dist.new_group([0, 1])
    assert dist.get_backend(both) == "commhost", dist.get_backend(both)
    import commhost.torch

    own = commhost.torch.commhost_group(both).group_name  # torch 2.x: the backend under torch's group
    assert own.startswith("main."), own  # its own commhost group
    t = torch.full((4,), float(rank + 1))
    dist.all_reduce(t, group=both)
    assert torch.equal(t, torch.full((4,), 3.0)), t

    # A group of one rank: rank 1 is not a member and gets no group.
    solo = dist.new_group([1])
    if rank == 1:
        t = torch.full((2,), 5.0)
        dist.all_reduce(t, group=solo)
        assert torch.equal(t, torch.full((2,), 5.0)), t
        assert dist.get_world_size(solo) == 1
    else:
        assert solo == dist.GroupMember.NON_GROUP_MEMBER

    # Subgroup ops interleave with world ops without mixing their sequences.
    a = torch.full((2,), float(rank))
    b = torch.full((2,), 10.0 * rank)
    wa = dist.all_reduce(a, async_op=True)
    wb = dist.all_reduce(b, group=both, async_op=True)
    wa.wait()
    wb.wait()
    assert torch.equal(a, torch.full((2,), 1.0)) and torch.equal(b, torch.full((2,), 10.0)), (a, b)

    objs = [None] * world
    dist.all_gather_object(objs, rank * 7, group=both)
    assert objs == [0, 7], objs
    dist.barrier(group=both)


def worker(args):
    import commhost.torch  # noqa: F401

    dist.init_process_group("commhost", init_method="env://")
    rank, world = dist.get_rank(), dist.get_world_size()
    test_objects(rank, world)
    print("rank %d: object collectives ok" % rank, flush=True)
    test_new_group(rank, world)
    print("rank %d: new_group ok" % rank, flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    launch_or_run(worker, __file__)
