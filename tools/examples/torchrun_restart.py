# SPDX-License-Identifier: Apache-2.0
"""What a torch user does instead of shrinking: torchrun's elastic agent restarts every
worker after one dies, and the workers resume from the last checkpoint. The same MLP as
`commhost train --hidden 128` (4 linear layers, tanh, input 32, output 8, global batch
256 split over the ranks), DDP on gloo, a checkpoint after every step (rank 0, written
atomically), one JSON row per step per rank with end_unix_ms.

Measure (kill a worker, time from the kill to the next completed step):
  python3 tools/examples/torchrun_restart.py --measure [--trials 5]
which runs `python3 -m torch.distributed.run --standalone --nproc_per_node 4
--max_restarts 1 --monitor_interval 0.1` on this script per trial.
"""
import argparse
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time

STEPS = 400


def worker(out_dir):
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(1)
    layers = []
    for i, (a, b) in enumerate([(32, 128), (128, 128), (128, 128), (128, 8)]):
        layers.append(torch.nn.Linear(a, b))
        if i < 3:
            layers.append(torch.nn.Tanh())
    model = torch.nn.Sequential(*layers)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    ckpt = os.path.join(out_dir, "ckpt.pt")
    start = 0
    if os.path.exists(ckpt):
        state = torch.load(ckpt)
        model.load_state_dict(state["model"])
        start = state["step"]
    ddp = DDP(model)
    rows = open(os.path.join(out_dir, f"rank{rank}.jsonl"), "a")
    per = 256 // world
    for step in range(start, STEPS):
        t0 = time.perf_counter()
        g = torch.Generator().manual_seed(step * 1000 + rank)
        x = torch.randn(per, 32, generator=g)
        y = torch.randn(per, 8, generator=g)
        opt.zero_grad()
        loss = ((ddp(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
        if rank == 0:
            torch.save({"model": model.state_dict(), "step": step + 1}, ckpt + ".tmp")
            os.replace(ckpt + ".tmp", ckpt)
        rows.write(json.dumps({"step": step, "step_ms": (time.perf_counter() - t0) * 1000,
                               "end_unix_ms": time.time() * 1000, "attempt": os.environ.get("TORCHELASTIC_RESTART_COUNT")}) + "\n")
        rows.flush()
    dist.destroy_process_group()


def measure(trials):
    results = []
    for _ in range(trials):
        with tempfile.TemporaryDirectory(prefix="torchrun-restart-") as out:
            cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "4",
                   "--max_restarts", "1", "--monitor_interval", "0.1", "--redirects", "1", "--tee", "1",
                   __file__, "--worker", out]  # redirects/tee: torch 1.13 on Python 3.11 fails without them
            launcher = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            # Killed within training: once rank 0 has written a random number of step rows.
            at = random.randint(50, 200)
            rows_file = os.path.join(out, "rank0.jsonl")
            while not os.path.exists(rows_file) or sum(1 for _ in open(rows_file)) < at:
                time.sleep(0.05)
            victims = []
            for pid in subprocess.run(["pgrep", "-P", str(launcher.pid)], capture_output=True,
                                      text=True).stdout.split():
                env = open(f"/proc/{pid}/environ", "rb").read().split(b"\0")
                if b"RANK=2" in env:
                    victims.append(int(pid))
            kill_ms = time.time() * 1000
            for pid in victims:
                os.kill(pid, signal.SIGKILL)
            launcher.wait(timeout=300)
            rows = [json.loads(l) for l in open(os.path.join(out, "rank0.jsonl"))]
            after = [r for r in rows if r["end_unix_ms"] > kill_ms and r["attempt"] != "0"]
            before = [r["step_ms"] for r in rows if r["attempt"] == "0"]
            t = {"killed": bool(victims), "rc": launcher.returncode,
                 "to_next_step_s": (after[0]["end_unix_ms"] - kill_ms) / 1000 if after else None,
                 "step_ms": statistics.median(before) if before else None}
            results.append(t)
            print(json.dumps(t), flush=True)
    vals = [t["to_next_step_s"] for t in results if t["to_next_step_s"] is not None]
    if vals:
        print(f"torchrun --max_restarts 1: kill -> next completed step (s): median {statistics.median(vals):.3f}, "
              f"max {max(vals):.3f} (n={len(vals)})")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--worker")
    ap.add_argument("--measure", action="store_true")
    ap.add_argument("--trials", type=int, default=5)
    a = ap.parse_args()
    if a.worker:
        worker(a.worker)
    else:
        measure(a.trials)
