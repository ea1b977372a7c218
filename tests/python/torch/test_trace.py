# SPDX-License-Identifier: Apache-2.0
"""The supervisor and `commhost trace analyze` on a torch job: rank 1 skips an allreduce,
rank 0's times out (group.timeout 3s), the supervisor dumps every rank's flight recorder,
and analyze names rank 1 and the collective it never issued. World 2, real processes."""
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _launch import run_job  # noqa: E402


def worker():
    import torch
    import torch.distributed as dist

    import commhost.torch  # noqa: F401

    dist.init_process_group("commhost", init_method="env://")
    rank = dist.get_rank()
    t = torch.ones(8)
    for _ in range(3):
        dist.all_reduce(t)
    if rank == 1:
        time.sleep(8)  # skips the next allreduce; stays alive so rank 0's supervisor can ask for its dump
        return
    try:
        dist.all_reduce(t)
    except RuntimeError as e:
        print("rank 0 failed as expected:", str(e).splitlines()[0], flush=True)
        sys.exit(3)
    sys.exit("rank 0's allreduce completed without rank 1")


def main():
    binary = os.environ["COMMHOST_BIN"]
    with tempfile.TemporaryDirectory() as tmp:
        dumps = os.path.join(tmp, "dumps")
        config = os.path.join(tmp, "hang.yaml")
        with open(config, "w") as f:
            f.write("group: { name: main, timeout: 3s }\n"
                    "backends: { gloo: { options: { threads: 1, contexts: 1 } } }\n"
                    "routes: [{ device: cpu, backend: gloo }]\n"
                    f"supervisor: {{ flight_recorder: {{ dump_dir: {dumps} }} }}\n")
        env = {k: v for k, v in os.environ.items() if k != "COMMHOST_BIN"}
        cmd = [binary, "run", "-n", "2", "-c", config, "--", sys.executable, os.path.abspath(__file__), "--worker"]
        status = run_job(cmd, env, 120)
        assert status != 0, "the job with a skipped allreduce exited 0"
        out = subprocess.run([binary, "trace", "analyze", dumps], capture_output=True, text=True)
        print(out.stdout, out.stderr, flush=True)
        assert out.returncode == 0, out.stderr
        assert "Rank 1 never issued it: its last collective was allreduce seq" in out.stdout, out.stdout
        assert "the first divergence is at allreduce seq" in out.stdout, out.stdout
        assert "Look at rank 1 first" in out.stdout, out.stdout
    print("ok: the supervisor dumped the torch job and trace analyze named rank 1", flush=True)


if __name__ == "__main__":
    worker() if "--worker" in sys.argv else main()
