# SPDX-License-Identifier: Apache-2.0
"""Ops on __dlpack__ objects at 2 ranks over gloo: torch tensors (in place, zero copy,
bfloat16 included) and a bare object exposing only __dlpack__; non-contiguous
tensors refused. Run by ctest; launches itself per rank."""
import numpy as np

try:
    import torch
except ImportError:  # python3-torch is optional: the bare producer still runs
    torch = None

import harness
from harness import CONFIGS, expect_raises

import commhost


class OnlyDLPack:
    """Any producer: commhost must not care that a NumPy array is behind it."""

    def __init__(self, array):
        self.array = array

    def __dlpack__(self, stream=None):
        return self.array.__dlpack__()

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()


def check_torch(pg, r, n, tri):
    # In place and zero copy: the result lands in the tensor's own storage.
    t = torch.full((4, 3), float(r + 1))
    ptr = t.data_ptr()
    pg.allreduce(t).wait()
    assert t.data_ptr() == ptr and torch.equal(t, torch.full((4, 3), float(tri)))
    t[1] = float(r)
    pg.allreduce(t[1], op="max").wait()  # a view at an offset: only its row changes
    assert torch.equal(t[1], torch.full((3,), float(n - 1))) and torch.equal(t[0], torch.full((3,), float(tri)))
    assert torch.equal(t[2], torch.full((3,), float(tri)))
    assert commhost._describe_tensor(torch.zeros(2, 5, dtype=torch.float64)) == "f64[2, 5] on cpu"
    # Zero copy: commhost works on the producer's own memory, views at an offset included.
    assert commhost._data_ptr(t) == t.data_ptr() and commhost._data_ptr(t[1]) == t[1].data_ptr() != t.data_ptr()

    for dt in (torch.int8, torch.uint8, torch.int32, torch.int64, torch.float16, torch.bfloat16, torch.float64):
        x = torch.full((6,), r + 1, dtype=dt)
        pg.allreduce(x).wait()
        assert torch.equal(x, torch.full((6,), tri, dtype=dt)), (dt, x)
    if int(torch.__version__.split(".")[0]) < 2:
        # torch 1.13 exports no bool through DLPack: its refusal reaches the caller, cleanly.
        e = expect_raises(commhost.InvalidArgument, lambda: pg.broadcast(torch.zeros(3, dtype=torch.bool)),
                          "argument 'tensor' (Tensor) could not be exported", "RuntimeError: Bool type")
        assert "At:" not in str(e), str(e)
    else:
        # torch 2.x exports bool: it travels in place like any other dtype.
        b = torch.tensor([r == 0, False, r == 0])
        pg.broadcast(b).wait()
        assert b.tolist() == [True, False, True], b

    outs = [torch.empty(2, dtype=torch.int64) for _ in range(n)]
    pg.allgather(outs, torch.tensor([r, 2 * r])).wait()
    assert [o.tolist() for o in outs] == [[i, 2 * i] for i in range(n)]
    out = torch.empty(2 * n, dtype=torch.float32)
    pg.allgather_into_tensor(out, torch.tensor([float(r), 0.5])).wait()
    assert out.view(n, 2)[:, 0].tolist() == list(range(n))
    out = torch.empty(3)
    pg.reduce_scatter_tensor(out, torch.arange(3.0 * n)).wait()
    assert torch.equal(out, n * torch.arange(3.0 * r, 3.0 * r + 3))
    y = torch.empty(4, dtype=torch.int32)
    w = pg.send(torch.full((4,), 7 + r, dtype=torch.int32), (r + 1) % n)
    pg.recv(y, (r - 1) % n).wait()
    w.wait()
    assert (y == 7 + (r - 1) % n).all()

    e = expect_raises(commhost.InvalidArgument, lambda: pg.allreduce(torch.zeros(4, 4).t()), "not contiguous",
                      "Tensor")
    assert isinstance(e, ValueError)
    expect_raises(commhost.InvalidArgument, lambda: pg.allreduce(torch.zeros(2, dtype=torch.complex64)), "Tensor")
    expect_raises(commhost.InvalidArgument, lambda: pg.allreduce(torch.zeros(2, dtype=torch.int16)), "no commhost")


def check_bare(pg, r, n, tri):
    # A bare __dlpack__ producer (NumPy underneath): zero copy, in place.
    base = np.full(5, r + 1, np.float32)
    pg.allreduce(OnlyDLPack(base)).wait()
    assert (base == tri).all()
    outs = [OnlyDLPack(np.zeros(2, np.int64)) for _ in range(n)]
    pg.allgather(outs, OnlyDLPack(np.full(2, r, np.int64))).wait()
    assert [o.array[0] for o in outs] == list(range(n))


def worker(pg, args):
    r, n = pg.rank, pg.size
    tri = n * (n + 1) // 2
    if torch is not None:
        check_torch(pg, r, n, tri)
    else:
        print("torch is not installed: only the bare __dlpack__ producer is tested", flush=True)
    check_bare(pg, r, n, tri)
    pg.barrier().wait()


if __name__ == "__main__":
    harness.main(worker, [(2, CONFIGS / "gloo.yaml")])
