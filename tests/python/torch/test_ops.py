# SPDX-License-Identifier: Apache-2.0
"""Every c10d op of backend "commhost" at world 2, real processes, results checked exactly."""
import os
import sys
import warnings

import torch
import torch.distributed as dist

warnings.filterwarnings("ignore", message=".*(private function|will be deprecated).*")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _launch import launch_or_run  # noqa: E402

# Values chosen so every reduction is exact in every dtype (small integers).
DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int32, torch.int64, torch.int8, torch.uint8]
INT_DTYPES = [torch.int32, torch.int64, torch.int8, torch.uint8]


def check(got, want, what):
    if not torch.equal(got, want):
        raise AssertionError("rank %d: %s: got %s, want %s" % (dist.get_rank(), what, got.tolist(), want.tolist()))


def expect_error(fn, *fragments):
    try:
        fn()
    except RuntimeError as e:
        text = str(e)
        missing = [f for f in fragments if f not in text]
        assert not missing, "error %r lacks %r" % (text, missing)
        return text
    raise AssertionError("expected an error containing %r" % (fragments,))


def test_allreduce(rank, world):
    # rank r holds r + 1: with 2 ranks the values are 1 and 2.
    a, b = 1, 2
    want = {
        dist.ReduceOp.SUM: a + b,
        dist.ReduceOp.PRODUCT: a * b,
        dist.ReduceOp.MIN: min(a, b),
        dist.ReduceOp.MAX: max(a, b),
    }
    for dtype in DTYPES:
        for op, value in want.items():
            t = torch.full((5,), rank + 1, dtype=dtype)
            dist.all_reduce(t, op=op)
            check(t, torch.full((5,), value, dtype=dtype), "all_reduce %s %s" % (op, dtype))
    for dtype in [torch.float32, torch.float64]:
        t = torch.full((3,), rank + 1, dtype=dtype)
        dist.all_reduce(t, op=dist.ReduceOp.AVG)
        check(t, torch.full((3,), 1.5, dtype=dtype), "all_reduce AVG %s" % dtype)
    for dtype in INT_DTYPES:
        for op, value in [(dist.ReduceOp.BAND, 6 & 5), (dist.ReduceOp.BOR, 6 | 5), (dist.ReduceOp.BXOR, 6 ^ 5)]:
            t = torch.full((4,), 6 if rank == 0 else 5, dtype=dtype)
            dist.all_reduce(t, op=op)
            check(t, torch.full((4,), value, dtype=dtype), "all_reduce %s %s" % (op, dtype))
    # Complex travels as its real view; SUM adds both parts.
    c = torch.tensor([1 + 2j, 3 - 1j], dtype=torch.complex64) * (rank + 1)
    dist.all_reduce(c)
    check(c, torch.tensor([3 + 6j, 9 - 3j], dtype=torch.complex64), "all_reduce complex64")
    # Multi-dimensional, larger than one chunk of the shm backend.
    big = torch.arange(300000, dtype=torch.float32).reshape(300, 1000) * (rank + 1)
    dist.all_reduce(big)
    check(big, torch.arange(300000, dtype=torch.float32).reshape(300, 1000) * 3, "all_reduce 1.2 MB")
    # async: wait() and the future both see the result.
    t = torch.ones(8) * (rank + 1)
    work = dist.all_reduce(t, async_op=True)
    fut = work.get_future()
    work.wait()
    assert work.is_completed() and work.is_success()
    check(fut.wait()[0], torch.full((8,), 3.0), "all_reduce future value")
    chained = dist.all_reduce(torch.ones(2), async_op=True).get_future().then(lambda f: f.value()[0] * 10)
    check(chained.wait(), torch.full((2,), 20.0), "all_reduce future then()")
    # coalesced: several tensors in one call.
    ts = [torch.full((3,), rank + 1.0), torch.full((2, 2), 10.0 * (rank + 1))]
    dist.all_reduce_coalesced(ts)
    check(ts[0], torch.full((3,), 3.0), "all_reduce_coalesced[0]")
    check(ts[1], torch.full((2, 2), 30.0), "all_reduce_coalesced[1]")


def test_rooted(rank, world):
    for root in range(world):
        t = torch.arange(6, dtype=torch.int64) if rank == root else torch.zeros(6, dtype=torch.int64)
        dist.broadcast(t, src=root)
        check(t, torch.arange(6, dtype=torch.int64), "broadcast from %d" % root)
    t = torch.full((4,), float(rank + 1))
    dist.reduce(t, dst=1)
    if rank == 1:
        check(t, torch.full((4,), 3.0), "reduce to 1")
    t = torch.full((4,), rank + 3, dtype=torch.int32)
    dist.reduce(t, dst=0, op=dist.ReduceOp.MAX)
    if rank == 0:
        check(t, torch.full((4,), 4, dtype=torch.int32), "reduce MAX to 0")
    # gather to 1
    mine = torch.full((3,), float(rank))
    outs = [torch.empty(3) for _ in range(world)] if rank == 1 else None
    dist.gather(mine, gather_list=outs, dst=1)
    if rank == 1:
        for r in range(world):
            check(outs[r], torch.full((3,), float(r)), "gather[%d]" % r)
    # scatter from 0
    out = torch.empty(2, dtype=torch.int64)
    ins = [torch.full((2,), 10 * r, dtype=torch.int64) for r in range(world)] if rank == 0 else None
    dist.scatter(out, scatter_list=ins, src=0)
    check(out, torch.full((2,), 10 * rank, dtype=torch.int64), "scatter")


def test_gathers(rank, world):
    mine = torch.arange(4, dtype=torch.float64) + 100 * rank
    outs = [torch.zeros(4, dtype=torch.float64) for _ in range(world)]
    dist.all_gather(outs, mine)
    for r in range(world):
        check(outs[r], torch.arange(4, dtype=torch.float64) + 100 * r, "all_gather[%d]" % r)
    flat = torch.zeros(world * 4, dtype=torch.float64)
    dist.all_gather_into_tensor(flat, mine)
    check(flat, torch.cat([torch.arange(4, dtype=torch.float64) + 100 * r for r in range(world)]), "all_gather_into_tensor")
    flat = torch.zeros(world * 4, dtype=torch.float64)
    dist._all_gather_base(flat, mine)
    check(flat, torch.cat([torch.arange(4, dtype=torch.float64) + 100 * r for r in range(world)]), "_all_gather_base")
    # coalesced: two inputs of different shapes.
    ins = [torch.full((2,), rank + 1, dtype=torch.int32), torch.full((3, 2), 10 * (rank + 1), dtype=torch.int32)]
    out_lists = [[torch.zeros(2, dtype=torch.int32), torch.zeros(3, 2, dtype=torch.int32)] for _ in range(world)]
    dist.all_gather_coalesced(out_lists, ins)
    for r in range(world):
        check(out_lists[r][0], torch.full((2,), r + 1, dtype=torch.int32), "all_gather_coalesced[%d][0]" % r)
        check(out_lists[r][1], torch.full((3, 2), 10 * (r + 1), dtype=torch.int32), "all_gather_coalesced[%d][1]" % r)


def test_reduce_scatter(rank, world):
    # input i of rank r is (i + 1) * (r + 1): output on rank i is (i + 1) * (1 + 2).
    ins = [torch.full((3,), float((i + 1) * (rank + 1))) for i in range(world)]
    out = torch.zeros(3)
    dist.reduce_scatter(out, ins)
    check(out, torch.full((3,), float((rank + 1) * 3)), "reduce_scatter")
    full = torch.cat(ins)
    out = torch.zeros(3)
    dist.reduce_scatter_tensor(out, full)
    check(out, torch.full((3,), float((rank + 1) * 3)), "reduce_scatter_tensor")
    out = torch.zeros(3)
    dist._reduce_scatter_base(out, full, op=dist.ReduceOp.MAX)
    check(out, torch.full((3,), float((rank + 1) * 2)), "_reduce_scatter_base MAX")


def test_alltoall(rank, world):
    # element [to] of rank `rank` is 10 * rank + to
    ins = [torch.full((2,), 10 * rank + to, dtype=torch.int64) for to in range(world)]
    outs = [torch.zeros(2, dtype=torch.int64) for _ in range(world)]
    dist.all_to_all(outs, ins)
    for src in range(world):
        check(outs[src], torch.full((2,), 10 * src + rank, dtype=torch.int64), "all_to_all from %d" % src)
    inp = torch.cat(ins)
    out = torch.zeros(2 * world, dtype=torch.int64)
    dist.all_to_all_single(out, inp)
    check(out, torch.cat([torch.full((2,), 10 * s + rank, dtype=torch.int64) for s in range(world)]), "all_to_all_single")
    # uneven: rank r sends (to + 1) * (r + 1) rows to rank `to`; rows are [r, to] pairs.
    in_splits = [(to + 1) * (rank + 1) for to in range(world)]
    out_splits = [(rank + 1) * (src + 1) for src in range(world)]
    inp = torch.cat([torch.tensor([[rank, to]] * n, dtype=torch.float32) for to, n in enumerate(in_splits)])
    out = torch.zeros(sum(out_splits), 2)
    dist.all_to_all_single(out, inp, output_split_sizes=out_splits, input_split_sizes=in_splits)
    want = torch.cat([torch.tensor([[src, rank]] * n, dtype=torch.float32) for src, n in enumerate(out_splits)])
    check(out, want, "all_to_all_single with split sizes")


def test_p2p_and_barriers(rank, world):
    dist.barrier()
    # dist.monitored_barrier() admits gloo only (a Python check): commhost.torch has its own.
    from datetime import timedelta

    import commhost.torch as ct
    ct.monitored_barrier(timeout=timedelta(seconds=20), wait_all_ranks=True)
    ct.monitored_barrier()
    assert ct.commhost_group().seq > 0
    both = dist.new_group([0, 1])
    ct.monitored_barrier(both, timeout=timedelta(seconds=20))
    assert ct.commhost_group(both).group_name.startswith("main.")
    gloo = dist.new_group([0, 1], backend="gloo")
    try:
        ct.commhost_group(gloo)
        raise AssertionError("commhost_group took a gloo group")
    except ValueError as e:
        assert "is not a commhost process group" in str(e), e
    peer = 1 - rank
    if rank == 0:
        dist.send(torch.arange(5, dtype=torch.float32), dst=1)
        t = torch.zeros(5, dtype=torch.float32)
        dist.recv(t, src=1, tag=7)
        check(t, torch.arange(5, dtype=torch.float32) * 2, "recv from 1")
    else:
        t = torch.zeros(5, dtype=torch.float32)
        dist.recv(t, src=0)
        check(t, torch.arange(5, dtype=torch.float32), "recv from 0")
        dist.send(t * 2, dst=0, tag=7)
    # isend / irecv both ways at once
    out = torch.full((3,), float(rank))
    got = torch.zeros(3)
    reqs = [dist.isend(out, dst=peer), dist.irecv(got, src=peer)]
    for r in reqs:
        r.wait()
    check(got, torch.full((3,), float(peer)), "irecv")
    # recv from any source (gloo serves it; shm.yaml routes point-to-point to gloo): the
    # source rank comes back from the Work.
    if rank == 0:
        t = torch.zeros(2)
        src = dist.recv(t)
        assert src == 1, src
        check(t, torch.full((2,), 42.0), "recv any source")
    else:
        dist.send(torch.full((2,), 42.0), dst=0)
    dist.barrier()


def test_noncontiguous(rank, world):
    """As c10d's gloo: a non-contiguous tensor is reduced through a contiguous copy whose
    result is written back into it (and into the tensor it views) before wait() returns."""
    base = torch.arange(12, dtype=torch.float32).reshape(3, 4) + rank
    nc = base.t()
    assert not nc.is_contiguous()
    dist.all_reduce(nc)
    want = torch.arange(12, dtype=torch.float32).reshape(3, 4) * world + sum(range(world))
    check(nc, want.t(), "allreduce of a transposed tensor")
    check(base, want, "the tensor the transposed view views")
    assert not nc.is_contiguous()
    # A strided input (read only) and strided outputs (written back).
    outs = [torch.zeros(4, 3).t() for _ in range(world)]
    inp = (torch.arange(12, dtype=torch.float32).reshape(4, 3) + 100 * rank).t()
    dist.all_gather(outs, inp)
    for r in range(world):
        check(outs[r], (torch.arange(12, dtype=torch.float32).reshape(4, 3) + 100 * r).t(), "all_gather output %d" % r)
    # Asynchronous: in place once wait() returns, and the future's value is the caller's tensor.
    every_other = torch.zeros(12)[::2]
    every_other.fill_(rank + 1)
    work = dist.all_reduce(every_other, async_op=True)
    work.wait()
    check(every_other, torch.full((6,), float(world * (world + 1) // 2)), "allreduce of every other element")
    assert work.get_future().value()[0].data_ptr() == every_other.data_ptr()
    dist.barrier()


def test_sparse(rank, world):
    """Sparse COO allreduce as c10d's gloo does it (SUM of every rank's entries, coalesced)."""
    if rank == 0:
        t = torch.sparse_coo_tensor(torch.tensor([[0, 2], [1, 0]]), torch.tensor([1.0, 2.0]), (4, 2))
    else:  # a different nnz, an entry shared with rank 0, and an uncoalesced duplicate
        t = torch.sparse_coo_tensor(torch.tensor([[2, 3, 3], [0, 1, 1]]), torch.tensor([2.0, 3.0, 1.0]), (4, 2))
    dist.all_reduce(t)
    check(t.to_dense(), torch.tensor([[0.0, 1], [0, 0], [4, 0], [0, 4]]), "sparse all_reduce")
    # Hybrid: one sparse dim, a dense row per entry.
    h = torch.sparse_coo_tensor(torch.tensor([[rank]]), torch.full((1, 3), rank + 1.0), (3, 3))
    work = dist.all_reduce(h, async_op=True)
    work.wait()
    check(h.to_dense(), torch.tensor([[1.0, 1, 1], [2, 2, 2], [0, 0, 0]]), "hybrid sparse all_reduce")
    # Only SUM, as gloo; a shape that differs between ranks is named.
    expect_error(lambda: dist.all_reduce(torch.zeros(2).to_sparse(), op=dist.ReduceOp.MAX), "SUM only")
    expect_error(lambda: dist.all_reduce(torch.zeros(2 + rank).to_sparse()), "every rank must pass the same shape")
    dist.barrier()


def test_errors(rank, world):
    expect_error(lambda: dist.all_reduce(torch.zeros(2, dtype=torch.int16)), "allreduce", "int16")
    # An invalid root is refused by commhost's validation with its own text, before sending.
    expect_error(_bad_root, "broadcast", "root")
    dist.barrier()


def test_async_errors(rank, world):
    """Errors that happen after the call returns reach Work.wait() and the future with
    commhost's text (group, rank, op, seq)."""
    from datetime import timedelta

    if rank == 0:
        # wait(timeout) gives up on a recv nobody has sent yet; the recv stays in flight
        # and completes once rank 1 sends (after the barrier).
        t = torch.zeros(2)
        work = dist.irecv(t, src=1, tag=99)
        expect_error(lambda: work.wait(timedelta(milliseconds=300)), "[group main rank 0] recv seq", "300ms")
        assert not work.is_completed()
        dist.barrier()
        work.wait()
        check(t, torch.full((2,), 9.0), "recv after a timed-out wait")
    else:
        dist.barrier()
        dist.send(torch.full((2,), 9.0), dst=0, tag=99)
    # A group with a 1 s op timeout: the recv itself fails, and its future carries the error.
    quick = dist.new_group([0, 1], timeout=timedelta(seconds=1))
    if rank == 0:
        fut = dist.irecv(torch.zeros(2), src=1, tag=5, group=quick).get_future()
        text = expect_error(fut.wait, "[group main.torch", "rank 0] recv seq 1")
        print("rank 0: a failed recv's future says: " + text, flush=True)
    dist.barrier()


def _bad_root():
    from torch.distributed.distributed_c10d import _get_default_group
    opts = dist.BroadcastOptions()
    opts.rootRank = 5
    opts.rootTensor = 0
    _get_default_group().broadcast([torch.zeros(2)], opts).wait()


def worker(args):
    import commhost.torch  # registers backend "commhost"

    dist.init_process_group("commhost", init_method="env://")
    rank, world = dist.get_rank(), dist.get_world_size()
    assert world == 2, world
    assert dist.get_backend() == "commhost", dist.get_backend()
    # torch 1.13: the default group itself; torch 2.x: its cpu backend.
    pg = commhost.torch.commhost_group()
    assert type(pg).__name__ == "ProcessGroupCommhost", type(pg)
    assert pg.config_source == (args.config or "<embedded default>"), pg.config_source
    if "shm" in os.path.basename(args.config):
        assert "shm" in pg.backends, pg.backends  # the shm backend came up (its rendezvous passed)
    for test in [test_allreduce, test_rooted, test_gathers, test_reduce_scatter, test_alltoall,
                 test_p2p_and_barriers, test_noncontiguous, test_sparse, test_errors, test_async_errors]:
        test(rank, world)
        print("rank %d: %s ok" % (rank, test.__name__), flush=True)
    dist.destroy_process_group()
    print("rank %d: all ops ok (config %s)" % (rank, os.environ.get("COMMHOST_CONFIG", "<embedded default>")))


if __name__ == "__main__":
    launch_or_run(worker, __file__)
