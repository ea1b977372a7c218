# SPDX-License-Identifier: Apache-2.0
"""DeviceMesh and DTensor on backend "commhost" at world 4 (a 2 x 2 cpu mesh), real
processes: placements and redistribution between Shard, Replicate and Partial, and a
tensor-parallel MLP whose outputs and gradients equal one process's. Skipped (77) on
torch 1.x, which has neither."""
import copy
import os
import sys
import warnings

import torch
import torch.distributed as dist

warnings.filterwarnings("ignore")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _launch import launch_or_run  # noqa: E402

SKIP = 77


def check(got, want, what, atol=0.0):
    ok = torch.equal(got, want) if atol == 0.0 else torch.allclose(got, want, atol=atol, rtol=0)
    if not ok:
        raise AssertionError("rank %d: %s: got %s, want %s" % (dist.get_rank(), what, got.tolist(), want.tolist()))


def test_mesh(mesh, commhost_torch):
    for dim in ("dp", "tp"):
        backend = mesh.get_group(dim)._get_backend(torch.device("cpu"))
        assert isinstance(backend, commhost_torch.ProcessGroupCommhost), (dim, type(backend))
        assert backend.size() == 2, (dim, backend.size())


def test_placements(mesh, rank):
    from torch.distributed.tensor import DTensor, Partial, Replicate, Shard, distribute_tensor

    full = torch.arange(48, dtype=torch.float32).reshape(8, 6)
    dp, tp = mesh.get_local_rank("dp"), mesh.get_local_rank("tp")
    dt = distribute_tensor(full, mesh, [Shard(0), Replicate()])
    check(dt.to_local(), full[4 * dp:4 * dp + 4], "Shard(0), Replicate()")
    check(dt.redistribute(mesh, [Replicate(), Replicate()]).to_local(), full, "-> Replicate, Replicate")
    check(dt.redistribute(mesh, [Replicate(), Shard(1)]).to_local(), full[:, 3 * tp:3 * tp + 3], "-> Replicate, Shard(1)")
    check(dt.redistribute(mesh, [Shard(1), Shard(0)]).to_local(), full[4 * tp:4 * tp + 4, 3 * dp:3 * dp + 3],
          "-> Shard(1), Shard(0)")
    partial = DTensor.from_local(torch.full((2, 3), float(rank + 1)), mesh, [Partial(), Partial()])
    check(partial.redistribute(mesh, [Replicate(), Replicate()]).to_local(), torch.full((2, 3), 10.0),
          "Partial, Partial -> Replicate (sum of 1..4)")
    check(partial.full_tensor(), torch.full((2, 3), 10.0), "full_tensor of Partial")


def test_tensor_parallel_mlp(mesh, rank):
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    reference = copy.deepcopy(model)
    x = torch.randn(5, 6)
    tp_model = parallelize_module(model, mesh["tp"], {"0": ColwiseParallel(), "2": RowwiseParallel()})
    out = tp_model(x)
    want = reference(x)
    check(out.full_tensor() if hasattr(out, "full_tensor") else out, want, "tensor-parallel MLP output", atol=1e-5)
    (out.full_tensor() if hasattr(out, "full_tensor") else out).sum().backward()
    want.sum().backward()
    for (name, p), (_, q) in zip(tp_model.named_parameters(), reference.named_parameters()):
        grad = p.grad.full_tensor() if hasattr(p.grad, "full_tensor") else p.grad
        check(grad, q.grad, "gradient of " + name, atol=1e-5)


def worker(args):
    if int(torch.__version__.split(".")[0]) < 2:
        sys.exit(SKIP)
    import commhost.torch as commhost_torch
    from torch.distributed.device_mesh import init_device_mesh

    dist.init_process_group("commhost", init_method="env://")
    rank = dist.get_rank()
    assert dist.get_world_size() == 4
    mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
    for test in (test_mesh, test_placements, test_tensor_parallel_mlp):
        test(mesh, commhost_torch) if test is test_mesh else test(mesh, rank)
        print("rank %d: %s ok" % (rank, test.__name__), flush=True)
    dist.destroy_process_group()
    print("rank %d: DeviceMesh and DTensor ok" % rank)


if __name__ == "__main__":
    if int(torch.__version__.split(".")[0]) < 2:
        print("torch %s has no DeviceMesh / DTensor; skipped" % torch.__version__)
        sys.exit(SKIP)
    launch_or_run(worker, __file__)
