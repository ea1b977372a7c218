# SPDX-License-Identifier: Apache-2.0
"""torch 2.x's surface of backend "commhost" at world 2, real processes: the backend under
torch's own ProcessGroup (per device type), device maps, coalescing, the tensor-in/tensor-out
collectives, sequence numbers, pending works, completion hooks. Skipped (77) on torch 1.x."""
import os
import sys
import threading
import warnings

import torch
import torch.distributed as dist

warnings.filterwarnings("ignore", message=".*(private function|will be deprecated).*")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _launch import launch_or_run  # noqa: E402

SKIP = 77


def check(got, want, what):
    if not torch.equal(got, want):
        raise AssertionError("rank %d: %s: got %s, want %s" % (dist.get_rank(), what, got.tolist(), want.tolist()))


def test_backend_under_process_group(rank, world, commhost_torch):
    pg = dist.group.WORLD
    assert isinstance(pg, dist.ProcessGroup), type(pg)
    assert not isinstance(pg, commhost_torch.ProcessGroupCommhost), "torch 2.x wraps the backend in its own group"
    backend = pg._get_backend(torch.device("cpu"))
    assert isinstance(backend, commhost_torch.ProcessGroupCommhost), type(backend)
    assert commhost_torch.commhost_group() is backend or commhost_torch.commhost_group().seq == backend.seq
    assert dist.get_backend() == "commhost", dist.get_backend()
    assert backend.rank() == rank and backend.size() == world


def test_tensor_collectives(rank, world):
    out = torch.empty(world * 3)
    dist.all_gather_into_tensor(out, torch.full((3,), float(rank + 1)))
    check(out, torch.tensor([1.0, 1, 1, 2, 2, 2]), "all_gather_into_tensor")
    red = torch.empty(2)
    dist.reduce_scatter_tensor(red, torch.arange(4, dtype=torch.float32) * (rank + 1))
    check(red, (torch.arange(4, dtype=torch.float32) * 3)[rank * 2:rank * 2 + 2], "reduce_scatter_tensor")


def test_coalescing(rank, world):
    # Captured by torch's Python and issued as one allreduce_coalesced.
    a, b = torch.full((4,), rank + 1.0), torch.full((2, 2), 10.0 * (rank + 1))
    with dist._coalescing_manager(async_ops=True) as cm:
        dist.all_reduce(a)
        dist.all_reduce(b)
    cm.wait()
    check(a, torch.full((4,), 3.0), "coalesced all_reduce a")
    check(b, torch.full((2, 2), 30.0), "coalesced all_reduce b")
    # allgather_into_tensor_coalesced and reduce_scatter_tensor_coalesced.
    outs = [torch.empty(world * 2), torch.empty(world * 3, dtype=torch.float64)]
    ins = [torch.full((2,), float(rank)), torch.full((3,), rank + 0.5, dtype=torch.float64)]
    with dist._coalescing_manager(async_ops=True) as cm:
        for o, i in zip(outs, ins):
            dist.all_gather_into_tensor(o, i)
    cm.wait()
    check(outs[0], torch.tensor([0.0, 0, 1, 1]), "coalesced all_gather_into_tensor 0")
    check(outs[1], torch.tensor([0.5, 0.5, 0.5, 1.5, 1.5, 1.5], dtype=torch.float64), "coalesced all_gather 1")
    reds = [torch.empty(1), torch.empty(2)]
    with dist._coalescing_manager(async_ops=True) as cm:
        dist.reduce_scatter_tensor(reds[0], torch.tensor([1.0, 2.0]) * (rank + 1))
        dist.reduce_scatter_tensor(reds[1], torch.arange(4.0) + rank)
    cm.wait()
    check(reds[0], torch.tensor([3.0, 6.0])[rank:rank + 1], "coalesced reduce_scatter_tensor 0")
    check(reds[1], (2 * torch.arange(4.0) + 1)[2 * rank:2 * rank + 2], "coalesced reduce_scatter_tensor 1")
    # With a device: the backend's startCoalescing/endCoalescing bracket the ops, and the
    # block's Work covers them.
    c = torch.full((3,), rank + 1.0)
    with dist._coalescing_manager(device=torch.device("cpu"), async_ops=True) as cm:
        dist.all_reduce(c)
    cm.wait()
    check(c, torch.full((3,), 3.0), "coalesced all_reduce with a device")


def test_sequence_and_pending(rank, world, commhost_torch):
    backend = commhost_torch.commhost_group()
    before = backend.seq
    dist.all_reduce(torch.ones(1))
    assert backend.seq == before + 1, (before, backend.seq)
    works = [dist.all_reduce(torch.ones(1000) * i, async_op=True) for i in range(8)]
    dist.group.WORLD._wait_for_pending_works()
    assert all(w.is_completed() for w in works), [w.is_completed() for w in works]


def test_completion_hook(rank, world):
    pg = dist.group.WORLD
    if not hasattr(pg, "_register_on_completion_hook"):
        print("rank %d: this torch binds no _register_on_completion_hook; skipped" % rank, flush=True)
        return
    seen, done = [], threading.Event()

    def hook(info):
        seen.append((info.op_type, info.seq))
        done.set()

    pg._register_on_completion_hook(hook)
    dist.all_reduce(torch.ones(2))
    assert done.wait(10), "the completion hook was not called within 10 s"
    assert seen and "ALLREDUCE" in str(seen[-1][0]), seen


def test_new_group_and_device_map(rank, world, commhost_torch):
    sub = dist.new_group([0, 1], backend="commhost")
    t = torch.full((2,), rank + 1.0)
    dist.all_reduce(t, group=sub)
    check(t, torch.full((2,), 3.0), "all_reduce on new_group(backend='commhost')")
    assert isinstance(sub._get_backend(torch.device("cpu")), commhost_torch.ProcessGroupCommhost)
    # A device map: commhost for cpu tensors, another backend for cuda (gloo here: this
    # torch has no NCCL); the cpu op reaches commhost.
    mixed = dist.new_group([0, 1], backend="cpu:commhost,cuda:gloo")
    assert isinstance(mixed._get_backend(torch.device("cpu")), commhost_torch.ProcessGroupCommhost)
    t = torch.full((2,), rank + 1.0)
    dist.all_reduce(t, group=mixed)
    check(t, torch.full((2,), 3.0), "all_reduce on a cpu:commhost,cuda:gloo group")
    dist.destroy_process_group(sub)
    dist.destroy_process_group(mixed)


def worker(args):
    if int(torch.__version__.split(".")[0]) < 2:
        print("torch %s: the torch 2.x surface does not apply; skipped" % torch.__version__)
        sys.exit(SKIP)
    import commhost.torch as commhost_torch

    dist.init_process_group("commhost", init_method="env://")
    rank, world = dist.get_rank(), dist.get_world_size()
    assert world == 2, world
    for test, extra in [(test_backend_under_process_group, True), (test_tensor_collectives, False),
                        (test_coalescing, False), (test_sequence_and_pending, True), (test_completion_hook, False),
                        (test_new_group_and_device_map, True)]:
        test(rank, world, commhost_torch) if extra else test(rank, world)
        print("rank %d: %s ok" % (rank, test.__name__), flush=True)
    dist.destroy_process_group()
    print("rank %d: torch %s surface ok" % (rank, torch.__version__))


if __name__ == "__main__":
    if int(torch.__version__.split(".")[0]) < 2:
        print("torch %s: the torch 2.x surface does not apply; skipped" % torch.__version__)
        sys.exit(SKIP)
    launch_or_run(worker, __file__)
