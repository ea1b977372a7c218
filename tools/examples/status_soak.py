# SPDX-License-Identifier: Apache-2.0
"""Status and metrics soak (issue 39's closing note): a 4-rank `commhost train` under
`commhost run --metrics --dashboard`, with `commhost status` run and /metrics and
/dashboard.json scraped once a second for --minutes. Every 30 s it samples each rank's and
the launcher's RSS, open descriptors and threads, and says at the end how much each grew
from the first sample after warm-up (a fixed-size status must not grow), with the status
queries' and scrapes' times and the ranks' own cost of publishing (publish_cost_us).

  python3 tools/examples/status_soak.py BUILD/bin/commhost configs/shm.yaml [--minutes 10]
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request


def proc_stats(pid):
    """(RSS KiB, descriptors, threads) of a live process, or None."""
    try:
        with open(f"/proc/{pid}/status") as f:
            text = f.read()
        rss = int(re.search(r"VmRSS:\s+(\d+)", text).group(1))
        threads = int(re.search(r"Threads:\s+(\d+)", text).group(1))
        fds = len(os.listdir(f"/proc/{pid}/fd"))
        return rss, fds, threads
    except (OSError, AttributeError):
        return None


def get(url):
    t0 = time.monotonic()
    with urllib.request.urlopen(url, timeout=10) as r:
        body = r.read()
    return body, time.monotonic() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("commhost")
    ap.add_argument("config")
    ap.add_argument("--minutes", type=float, default=10)
    ap.add_argument("--ranks", type=int, default=4)
    a = ap.parse_args()
    tmp = tempfile.mkdtemp()
    out = open(os.path.join(tmp, "job.out"), "w+")
    job = subprocess.Popen(
        [a.commhost, "run", "-n", str(a.ranks), "-c", a.config, "--metrics", "127.0.0.1:0", "--", a.commhost,
         "train", "--epochs", "1000000", "--steps-per-epoch", "50", "--hidden", "64"],
        stdout=out, stderr=subprocess.STDOUT, env={**os.environ, "TMPDIR": tmp})
    store = metrics = None
    for _ in range(300):
        text = open(out.name).read()
        m1 = re.search(r"store at (127\.0\.0\.1:\d+)", text)
        m2 = re.search(r"metrics at http://(127\.0\.0\.1:\d+)", text)
        if m1 and m2:
            store, metrics = m1.group(1), m2.group(1)
            break
        time.sleep(0.1)
    if not store:
        sys.exit("the job printed no store or metrics address:\n" + open(out.name).read())
    time.sleep(5)  # the ranks start and train a while: warm-up, not measured
    ranks = [int(p) for p in subprocess.run(["pgrep", "-P", str(job.pid)], capture_output=True,
                                            text=True).stdout.split()]
    procs = {"launcher": job.pid, **{f"rank pid {p}": p for p in ranks}}
    samples = []
    status_s, scrape_s, dash_s, costs = [], [], [], []
    end = time.monotonic() + a.minutes * 60
    next_sample = 0.0
    while time.monotonic() < end and job.poll() is None:
        t0 = time.monotonic()
        r = subprocess.run([a.commhost, "status", "--master", store], capture_output=True, text=True)
        status_s.append(time.monotonic() - t0)
        if r.returncode not in (0, 3):
            sys.exit("commhost status failed: " + r.stdout + r.stderr)
        _, s = get(f"http://{metrics}/metrics")
        scrape_s.append(s)
        body, s = get(f"http://{metrics}/dashboard.json")
        dash_s.append(s)
        costs += [r["publish_cost_us"] for r in json.loads(body)["job"]["ranks"]]
        if time.monotonic() >= next_sample:
            samples.append({name: proc_stats(pid) for name, pid in procs.items()})
            next_sample = time.monotonic() + 30
        time.sleep(max(0.0, 1.0 - (time.monotonic() - t0)))
    alive = job.poll() is None
    job.terminate()
    job.wait(30)
    print(f"{a.minutes:g} min, {len(status_s)} status queries and as many scrapes of /metrics and /dashboard.json; "
          f"the job {'ran throughout' if alive else 'ENDED EARLY'}")
    for name in procs:
        first, last = samples[0][name], samples[-1][name]
        if first is None or last is None:
            print(f"  {name}: not sampled throughout")
            continue
        print(f"  {name}: RSS {first[0]} -> {last[0]} KiB ({last[0] - first[0]:+d}), fds {first[1]} -> {last[1]}, "
              f"threads {first[2]} -> {last[2]}")
    q = lambda xs, p: sorted(xs)[int(p * (len(xs) - 1))] * 1000
    print(f"  commhost status: median {q(status_s, 0.5):.0f} ms, p99 {q(status_s, 0.99):.0f} ms (the whole command)")
    print(f"  GET /metrics: median {q(scrape_s, 0.5):.1f} ms; GET /dashboard.json: median {q(dash_s, 0.5):.1f} ms")
    print(f"  ranks' publish cost per record: median {statistics.median(costs):.0f} us, max {max(costs):.0f} us "
          f"(once per heartbeat interval)")


if __name__ == "__main__":
    main()
