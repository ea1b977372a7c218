# SPDX-License-Identifier: Apache-2.0
"""Every ProcessGroup op on NumPy arrays, at 2 and 3 ranks over gloo: results, Work,
subgroups, argument errors, flight recorder. Run by ctest; launches itself per rank."""
import gc
import os
import sys
import threading
import time
import weakref

import numpy as np

import harness
from harness import CONFIGS, expect_raises

import commhost

BACKEND = "gloo"  # the config (configs/<BACKEND>.yaml) and the backend its allreduce takes


def check_allreduce(pg, r, n):
    tri = n * (n + 1) // 2
    for dt in (np.int8, np.uint8, np.int32, np.int64, np.float16, np.float32, np.float64):
        x = np.full(7, r + 1, dtype=dt)
        assert pg.allreduce(x).wait() is True
        assert (x == tri).all() and x.dtype == dt, (dt, x)
    x = np.arange(12, dtype=np.float32).reshape(3, 4) * (r + 1)  # 2-D, in place
    pg.allreduce(x).wait()
    assert np.array_equal(x, np.arange(12, dtype=np.float32).reshape(3, 4) * tri)
    x = np.array([r, -r, 5], dtype=np.int64)
    pg.allreduce(x, op="max").wait()
    assert x.tolist() == [n - 1, 0, 5]
    x = np.array([r + 1.0], dtype=np.float64)
    pg.allreduce(x, op=commhost.ReduceOp.MIN).wait()
    assert x[0] == 1.0
    x = np.array([r + 1], dtype=np.int32)
    pg.allreduce(x, op="product").wait()
    assert x[0] == np.prod(np.arange(1, n + 1))
    x = np.full(3, r + 1, dtype=np.float64)
    pg.allreduce(x, op=commhost.ReduceOp.premul_sum(0.5)).wait()
    assert np.allclose(x, 0.5 * tri)
    a, b = np.full(3, r, np.float32), np.full(5, 2 * r, np.float32)
    pg.allreduce_coalesced([a, b]).wait()
    assert (a == n * (n - 1) / 2).all() and (b == n * (n - 1)).all()


def check_rooted(pg, r, n):
    root = n - 1
    x = np.arange(6, dtype=np.float64) if r == root else np.zeros(6)
    pg.broadcast(x, root=root).wait()
    assert np.array_equal(x, np.arange(6, dtype=np.float64))
    # The root only reads a broadcast's tensor: a read-only array is fine there.
    ro = np.arange(4, dtype=np.int32)
    ro.setflags(write=False)
    y = ro if r == 0 else np.zeros(4, np.int32)
    pg.broadcast(y, root=0).wait()
    assert y.tolist() == [0, 1, 2, 3]

    x = np.full(4, r + 1, dtype=np.int64)
    pg.reduce(x, root=0).wait()
    if r == 0:
        assert (x == n * (n + 1) // 2).all()

    root = 1 % n
    outs = [np.zeros(3, np.int32) for _ in range(n)] if r == root else None
    pg.gather(outs, np.full(3, 10 + r, np.int32), root=root).wait()
    if r == root:
        assert [o[0] for o in outs] == [10 + i for i in range(n)]

    ins = [np.full(2, 100 + i, np.float32) for i in range(n)] if r == 0 else []
    out = np.zeros(2, np.float32)
    pg.scatter(out, ins, root=0).wait()
    assert (out == 100 + r).all()


def check_gathers(pg, r, n):
    outs = [np.empty(3, np.float32) for _ in range(n)]
    pg.allgather(outs, np.full(3, r, np.float32)).wait()
    assert [o.tolist() for o in outs] == [[i] * 3 for i in range(n)]

    out = np.empty(n * 4, np.int64)
    pg.allgather_into_tensor(out, np.arange(4, dtype=np.int64) + 10 * r).wait()
    assert np.array_equal(out.reshape(n, 4), np.arange(4) + 10 * np.arange(n)[:, None])

    # outputs[i][j]: rank j's inputs[i] (the inputs share a dtype, not a size).
    outs = [[np.empty(2, np.float64) for _ in range(n)], [np.empty(3, np.float64) for _ in range(n)]]
    pg.allgather_coalesced(outs, [np.full(2, r, np.float64), np.full(3, -r, np.float64)]).wait()
    for j in range(n):
        assert (outs[0][j] == j).all() and (outs[1][j] == -j).all(), outs

    out = np.empty(4, np.float32)
    pg.reduce_scatter(out, [np.full(4, 10 * r + i, np.float32) for i in range(n)]).wait()
    assert (out == sum(10 * j + r for j in range(n))).all()

    out = np.empty(4, np.int64)
    pg.reduce_scatter_tensor(out, np.arange(n * 4, dtype=np.int64) + r).wait()
    assert np.array_equal(out, n * np.arange(4 * r, 4 * r + 4) + n * (n - 1) // 2)

    outs = [np.empty(2, np.int32) for _ in range(n)]
    pg.alltoall(outs, [np.full(2, 100 * r + i, np.int32) for i in range(n)]).wait()
    assert [o[0] for o in outs] == [100 * j + r for j in range(n)]

    out = np.empty((n, 3), np.float64)
    inp = np.repeat((10 * r + np.arange(n, dtype=np.float64))[:, None], 3, axis=1)
    pg.alltoall_single(out, inp).wait()
    assert np.array_equal(out[:, 0], 10 * np.arange(n) + r)
    # Uneven splits: rank r sends r + 1 rows to every rank.
    inp = np.concatenate([np.full((r + 1, 2), 10 * r + i, np.int32) for i in range(n)])
    out = np.empty((sum(j + 1 for j in range(n)), 2), np.int32)
    pg.alltoall_single(out, inp, output_split_sizes=[j + 1 for j in range(n)],
                       input_split_sizes=[r + 1] * n).wait()
    row = 0
    for j in range(n):
        assert (out[row:row + j + 1] == 10 * j + r).all(), (j, out)
        row += j + 1


def check_p2p(pg, r, n):
    x = np.full(5, r, np.float32)
    y = np.empty(5, np.float32)
    send = pg.send(x, (r + 1) % n, tag=3)
    pg.recv(y, (r - 1) % n, tag=3).wait()
    send.wait()
    assert (y == (r - 1) % n).all()
    if r == 0:
        seen = set()
        for _ in range(n - 1):
            z = np.empty(2, np.int64)
            w = pg.recv_any_source(z, tag=9)
            w.wait()
            assert z[0] == 1000 + w.source_rank, (z, w.source_rank)
            seen.add(w.source_rank)
        assert seen == set(range(1, n))
    else:
        pg.send(np.full(2, 1000 + r, np.int64), 0, tag=9).wait()
    pg.barrier().wait()
    pg.monitored_barrier(timeout=20)


def check_work(pg, r, n):
    # Several in flight at once, waited in reverse; one dropped unwaited (its array must
    # stay alive until it completes: the Work holds it, then a completion callback).
    xs = [np.full(1000, i + r, np.float64) for i in range(4)]
    works = [pg.allreduce(x) for x in xs]
    dropped = np.ones(1 << 16, np.float32)
    dropped_ref = weakref.ref(dropped)
    pg.allreduce(dropped)
    del dropped
    gc.collect()
    for i, w in reversed(list(enumerate(works))):
        assert w.wait(timeout=30) and w.is_completed() and w.exception() is None
        assert (xs[i] == n * i + n * (n - 1) / 2).all()
        assert w.op == "allreduce" and "allreduce" in repr(w)
    # ... and is let go once it completed (released by a GIL holder: give it a moment).
    pg.barrier().wait()
    for _ in range(200):
        if dropped_ref() is None:
            break
        gc.collect()
        time.sleep(0.05)
    assert dropped_ref() is None, "the dropped Work's array was never released"
    # A Work.wait timeout is the wait's, not the op's: the recv still completes.
    if r == 0:
        y = np.zeros(2, np.int32)
        w = pg.recv(y, 1, tag=5)
        e = expect_raises(commhost.TimeoutError, lambda: w.wait(timeout=0.05), "not completed within")
        assert isinstance(e, TimeoutError) and isinstance(e, commhost.Error) and e.op == "recv"
        assert w.wait() and w.exception() is None and y.tolist() == [5, 5]
    elif r == 1:
        time.sleep(1.0)
        pg.send(np.full(2, 5, np.int32), 0, tag=5).wait()

def check_abort_work(pg, r, n):
    """An aborted Work: exception() gives the commhost.AbortedError, wait() raises it."""
    if r == 0:
        y = np.zeros(3, np.float32)
        w = pg.recv(y, 1, tag=42)
        w.abort("python test abort")
        e = w.exception()
        assert isinstance(e, commhost.AbortedError) and e.code == "aborted" and e.op == "recv", repr(e)
        assert "python test abort" in str(e) and w.is_completed()
        expect_raises(commhost.AbortedError, w.wait, "python test abort", "[group main rank 0] recv")
    pg.barrier().wait()
    if r == 1:  # the transport's receive still takes it (into the aborted work's array, kept alive)
        pg.send(np.ones(3, np.float32), 0, tag=42).wait()
    pg.barrier().wait()

def check_gil_released(pg, r, n):
    """While rank 0 waits for a late rank 1, its other Python threads run."""
    if r == 0:
        ticks, stop = [0], threading.Event()

        def spin():
            while not stop.is_set():
                ticks[0] += 1
                time.sleep(0.001)
        t = threading.Thread(target=spin)
        t.start()
        before = ticks[0]
        pg.allreduce(np.ones(4)).wait()  # blocks in the call (shm runs small ops inline) or in wait()
        during = ticks[0] - before
        stop.set()
        t.join()
        assert during > 20, f"only {during} ticks of another thread during a 1 s wait: the GIL was held"
    else:
        time.sleep(1.0 if r == 1 else 0)
        pg.allreduce(np.ones(4)).wait()


def check_hooks(pg, r, n):
    events = []
    hook = pg.add_completion_hook(events.append)
    bad = pg.add_completion_hook(lambda ev: 1 / 0)  # printed as unraisable; the job goes on
    pg.allreduce(np.ones(256, np.float32)).wait()
    pg.barrier().wait()
    deadline = time.time() + 10
    while {"allreduce", "barrier"} - {e["op"] for e in events} and time.time() < deadline:
        time.sleep(0.01)  # hooks run on the supervisor's hook thread, after the wait returns
    ar = [e for e in events if e["op"] == "allreduce"]
    assert ar, events
    ev = ar[-1]
    assert ev["group"] == "main" and ev["rank"] == r and ev["backend"] == BACKEND, ev
    assert ev["bytes"] == 1024 and ev["error"] is None and ev["duration"] >= 0 and ev["end"] >= ev["start"], ev
    assert ev["device_duration"] is None, ev  # a cpu backend has no device time
    pg.remove_completion_hook(hook)
    pg.remove_completion_hook(bad)
    seen = len(events)
    pg.barrier().wait()
    time.sleep(0.2)
    assert len(events) == seen, "a removed hook was still called"


def check_subgroups(pg, r, n):
    sub = pg.new_group([0, n - 1])
    if r in (0, n - 1):
        assert sub.size == 2 and sub.rank == (0 if r == 0 else 1) and sub.global_ranks == [0, n - 1]
        x = np.array([r], np.int64)
        sub.allreduce(x).wait()
        assert x[0] == n - 1
    else:
        assert sub is None
    halves = pg.split(color=r % 2, key=-r)
    members = [i for i in range(n) if i % 2 == r % 2]
    assert halves.size == len(members) and halves.global_ranks == sorted(members, reverse=True)
    x = np.array([r], np.int64)
    halves.allreduce(x).wait()
    assert x[0] == sum(members)
    assert pg.split(color=-1) is None


def check_errors(pg, r, n):
    x = np.zeros(8, np.float32)
    e = expect_raises(commhost.InvalidArgument, lambda: pg.allreduce(x[::2]), "non-contiguous", "ascontiguousarray")
    assert isinstance(e, ValueError)
    expect_raises(commhost.InvalidArgument, lambda: pg.allreduce(np.zeros(2, np.complex128)), "complex128",
                  "does not carry")
    expect_raises(commhost.InvalidArgument, lambda: pg.allreduce(np.zeros(2, np.uint16)), "uint16")
    ro = np.zeros(3, np.float32)
    ro.setflags(write=False)
    expect_raises(commhost.InvalidArgument, lambda: pg.allreduce(ro), "read-only", "allreduce")
    expect_raises(commhost.InvalidArgument, lambda: pg.allreduce([1, 2]), "'tensor'", "list")
    expect_raises(commhost.InvalidArgument, lambda: pg.allreduce(x, op="median"), "median")
    expect_raises(commhost.InvalidArgument, lambda: pg.allreduce(x, timeout=-1), "timeout")
    # The host's own validation, with its context as attributes (no op was issued).
    e = expect_raises(commhost.InvalidArgument, lambda: pg.allgather([np.zeros(3)], np.zeros(3)), "allgather")
    assert e.code == "invalid-argument", e.code
    assert e.group == "main" and e.rank == r and e.op == "allgather", (e.group, e.rank, e.op)
    e = expect_raises(commhost.InvalidArgument, lambda: pg.broadcast(x, root=n + 5), "root")
    pg.barrier().wait()  # every rank still in step


def check_introspection(pg, r, n):
    assert pg.name == "main" and pg.generation == 0 and pg.seq > 0 and pg.bytes_issued > 0
    assert BACKEND in pg.routes and "group:" in pg.config_yaml and len(pg.config_hash) == 16
    assert pg.config_source.endswith(BACKEND + ".yaml"), pg.config_source
    assert str(pg) == repr(pg) and "rank %d/%d" % (r, n) in repr(pg)
    info = commhost.launch_info()
    assert info["rank"] == r and info["world_size"] == n and info["master_port"] > 0
    # Reading the recorder writes nothing (it would overwrite an incident's dump).
    dump_dir = pg.config_yaml.split("dump_dir:", 1)[1].split("\n", 1)[0].strip().strip('"')
    dump = os.path.join(dump_dir, "rank%d.json" % r)
    before = os.stat(dump).st_mtime_ns if os.path.exists(dump) else None
    fr = pg.flight_recorder("python test")
    after = os.stat(dump).st_mtime_ns if os.path.exists(dump) else None
    assert before == after, "pg.flight_recorder() wrote %s" % dump
    for key in ("version", "reason", "pid", "rank", "groups", "entries", "swaps", "shadows"):
        assert key in fr, (key, sorted(fr))
    assert "path" not in fr, sorted(fr)
    assert fr["reason"] == "python test" and fr["rank"] == r
    assert any(g["name"] == "main" and g["world_size"] == n for g in fr["groups"])
    ops = {e["op"] for e in fr["entries"]}
    assert {"allreduce", "alltoall_single", "barrier"} <= ops, ops
    entry = fr["entries"][-1]
    for key in ("seq", "op", "backend", "state", "bytes"):
        assert key in entry, (key, entry)
    assert pg.shadow_report() == [] and pg.shadow_report(wait=0) == [] and pg.shadow_report(wait=0.01) == []
    pg.sync_point()
    assert pg.sync_status()["count"] == 1


def worker(pg, args):
    global BACKEND
    r, n = pg.rank, pg.size
    assert n == int(args[0]), (n, args)
    BACKEND = args[1]
    for check in (check_allreduce, check_rooted, check_gathers, check_p2p, check_work, check_abort_work,
                  check_gil_released, check_hooks, check_subgroups, check_errors, check_introspection):
        check(pg, r, n)
        print(f"[rank {r}] {check.__name__} ok", flush=True)


if __name__ == "__main__":
    # collectives_test.py [N] [gloo|shm]: N ranks on configs/<backend>.yaml (default 2, gloo).
    argv = sys.argv[1:] if "--worker" not in sys.argv else []
    sizes = [int(a) for a in argv if a.isdigit()] or [2]
    backend = next((a for a in argv if not a.isdigit()), "gloo")
    harness.main(worker, [(s, CONFIGS / f"{backend}.yaml", [s, backend]) for s in sizes])
