# SPDX-License-Identifier: Apache-2.0
"""Elastic membership figures (issue 38's closing note), from `commhost train --json`:
trials of a 4-rank `commhost train --check` under `commhost run` with
supervisor.on_peer_loss: shrink, one rank (random, 1..3) killed with SIGKILL at a random
moment. Per trial: the time from the kill to the survivors' next completed step, the
shrink itself, and with --restarts the time until the restarted rank has joined and a
4-rank step completed; the step time before and after. Also counts hangs (a job past its
limit), wrong results (a failed --check), and leftovers (processes, /dev/shm segments).

  python3 tools/examples/elastic_figures.py BUILD/bin/commhost configs/gloo.yaml [--trials 10] [--restarts]
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


def rank_pid(launcher, rank):
    """The pid of global rank `rank` among the launcher's children (their RANK variable)."""
    out = subprocess.run(["pgrep", "-P", str(launcher)], capture_output=True, text=True).stdout.split()
    for pid in out:
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                if f"RANK={rank}".encode() in f.read().split(b"\0"):
                    return int(pid)
        except OSError:
            pass
    return None


def shm_segments():
    return len([n for n in os.listdir("/dev/shm") if n.startswith("commhost")])


def trial(commhost, config, restarts, tmp, heartbeat):
    rows_path = os.path.join(tmp, "steps.jsonl")
    cmd = [commhost, "run", "-n", "4", "-c", config, "--set", "supervisor.on_peer_loss=shrink",
           "--set", "supervisor.heartbeat.interval=200ms", "--set", f"supervisor.heartbeat.timeout={heartbeat}"]
    if restarts:
        cmd += ["--max-restarts", "1"]
    cmd += ["--", commhost, "train", "--check", "--epochs", "8", "--steps-per-epoch", "50", "--hidden", "128",
            "--json", rows_path]
    before = shm_segments()
    env = dict(os.environ, TMPDIR=tmp)
    launcher = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    victim = random.randint(1, 3)
    time.sleep(random.uniform(1.5, 3.0))
    pid = rank_pid(launcher.pid, victim)
    kill_ms = time.time() * 1000
    if pid:
        os.kill(pid, signal.SIGKILL)
    try:
        out, _ = launcher.communicate(timeout=180)
        hung = False
    except subprocess.TimeoutExpired:
        launcher.kill()
        out, _ = launcher.communicate()
        hung = True
    rows = [json.loads(line) for line in open(rows_path)] if os.path.exists(rows_path) else []
    steps = [r for r in rows if "event" not in r]
    events = {r["event"]: r for r in rows if "event" in r}
    after = [r for r in steps if r["end_unix_ms"] > kill_ms]
    t = {"victim": victim, "hung": hung, "rc": launcher.returncode, "wrong": "above --tolerance" in out,
         "leftover_shm": shm_segments() - before, "killed": pid is not None}
    if "shrink" in events and after:
        t["to_next_step_s"] = (after[0]["end_unix_ms"] - kill_ms) / 1000
        t["shrink_ms"] = events["shrink"]["shrink_ms"]
        t["step_ms_before"] = statistics.median(r["step_ms"] for r in steps if r["generation"] == 0)
        t["step_ms_3_ranks"] = statistics.median(r["step_ms"] for r in steps if r["generation"] == 1) \
            if any(r["generation"] == 1 for r in steps) else None
    if "grow" in events:
        grown = [r for r in steps if r["generation"] == 2]
        t["to_4_ranks_s"] = (grown[0]["end_unix_ms"] - kill_ms) / 1000 if grown else None
        t["step_ms_after_rejoin"] = statistics.median(r["step_ms"] for r in grown) if grown else None
    return t


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("commhost")
    ap.add_argument("config")
    ap.add_argument("--trials", type=int, default=10)
    ap.add_argument("--restarts", action="store_true")
    ap.add_argument("--heartbeat-timeout", default="2s")
    a = ap.parse_args()
    results = []
    for i in range(a.trials):
        with tempfile.TemporaryDirectory(prefix="commhost-elastic-") as tmp:
            t = trial(a.commhost, a.config, a.restarts, tmp, a.heartbeat_timeout)
        results.append(t)
        print(json.dumps(t), flush=True)
    leaked = subprocess.run(["pgrep", "-f", "commhost-elastic-"], capture_output=True, text=True).stdout.split()
    done = [t for t in results if "to_next_step_s" in t]

    def stat(key):
        vals = [t[key] for t in done if t.get(key) is not None]
        return f"median {statistics.median(vals):.3f}, max {max(vals):.3f} (n={len(vals)})" if vals else "n/a"

    print(f"trials {len(results)}: hangs {sum(t['hung'] for t in results)}, wrong results "
          f"{sum(t['wrong'] for t in results)}, nonzero exits {sum(t['rc'] != 0 for t in results)}, "
          f"leftover /dev/shm segments {sum(max(0, t['leftover_shm']) for t in results)}, "
          f"processes left {len(leaked)}")
    print(f"kill -> survivors' next completed step (s): {stat('to_next_step_s')}")
    print(f"shrink() (ms): {stat('shrink_ms')}")
    print(f"step time 4 ranks (ms): {stat('step_ms_before')}; 3 ranks: {stat('step_ms_3_ranks')}")
    if a.restarts:
        print(f"kill -> first 4-rank step after the rejoin (s): {stat('to_4_ranks_s')}; "
              f"step time after (ms): {stat('step_ms_after_rejoin')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
