# SPDX-License-Identifier: Apache-2.0
"""`commhost status --store torch_tcp` on a torch job: 2 ranks on backend "commhost"
rendezvousing through torch's TCPStore at MASTER_ADDR:MASTER_PORT, launched by torchrun
(torch 1.x: `python3 -m torch.distributed.run --standalone`) or by `commhost run` with
init_method env:// (torch 2.x; see launcher()):
- status finds both ranks (their pids, group "main", allreduces completed) and says
  "2 ranks ok"; --json carries the same records;
- without --store torch_tcp, status fails within its timeout naming the flag to add;
- `trace dump --store torch_tcp` makes every rank dump its flight recorder;
- `commhost run --metrics 127.0.0.1:0 --store torch_tcp` serves both ranks' records
  (/status.json) and metrics (/metrics) read from torch's store (a second job under
  torch 1.x, whose status checks ran under torchrun).

    python3 test_status.py        (COMMHOST_BIN: the commhost CLI; PYTHONPATH: the module)
"""
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.request

WORKER_LIMIT_S = 90


def worker(outdir):
    import torch
    import torch.distributed as dist

    import commhost.torch  # noqa: F401  registers the backend

    dist.init_process_group("commhost")
    rank = dist.get_rank()
    if rank == 0:
        with open(os.path.join(outdir, "master.tmp"), "w") as f:
            f.write("%s:%s" % (os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"]))
        os.rename(os.path.join(outdir, "master.tmp"), os.path.join(outdir, "master"))
    t = torch.ones(4)
    stop = os.path.join(outdir, "stop")
    deadline = time.time() + WORKER_LIMIT_S
    while True:
        dist.all_reduce(t)
        t.fill_(1)
        # Every rank decides together whether to stop (the test's stop file, or a rank past
        # its time limit): nobody leaves the others mid-op.
        flag = torch.tensor([1.0 if os.path.exists(stop) or time.time() > deadline else 0.0])
        dist.all_reduce(flag)
        if flag.item() > 0:
            break
        time.sleep(0.02)
    dist.destroy_process_group()


def launchers(commhost):
    """(name, command, metrics) per job. torchrun where it can start: torch 2.6's torchrun
    (Debian 13) creates its store with libuv whatever USE_LIBUV says, and Debian's build has
    no libuv, so there the ranks are started by `commhost run` and init_method env://
    (rank 0 hosts torch's TCPStore at MASTER_PORT), the other way a torch job's store is
    torch's. The `commhost run` job serves --metrics from that store."""
    import torch

    served = ("commhost run", [commhost, "run", "-n", "2", "--metrics", "127.0.0.1:0", "--store", "torch_tcp", "--",
                               sys.executable], True)
    if torch.__version__.startswith("1."):
        # redirects/tee: torch 1.13's torchrun fails on Python 3.11 without them
        return [("torchrun", [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
                              "--redirects", "1", "--tee", "1", "--monitor_interval", "0.2"], False), served]
    return [served]


def run(cmd, timeout):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def wait_for(path, timeout, job):
    deadline = time.time() + timeout
    while not os.path.exists(path):
        if job.poll() is not None:
            sys.exit("the launcher exited (%s) before rank 0 wrote %s" % (job.returncode, path))
        if time.time() > deadline:
            sys.exit("rank 0 did not write %s within %d s" % (path, timeout))
        time.sleep(0.1)


def status_until_both(commhost, master, timeout):
    """Polls `status --json` until both ranks' records are there; returns them."""
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        last = run([commhost, "status", "--master", master, "--store", "torch_tcp", "--json"], 30)
        if last.returncode == 0:
            ranks = json.loads(last.stdout)["ranks"]
            if len(ranks) == 2 and all(r["groups"] for r in ranks):
                return ranks
        time.sleep(0.5)
    sys.exit("status never showed both ranks within %d s; last: rc %s\n%s\n%s"
             % (timeout, last.returncode, last.stdout, last.stderr))


def check(commhost, master, dumps):
    ranks = status_until_both(commhost, master, 45)
    assert sorted(r["rank"] for r in ranks) == [0, 1], ranks
    assert all(r["pid"] > 0 for r in ranks), ranks
    for r in ranks:
        group = r["groups"][0]
        assert group["name"] == "main" and group["last_completed_seq"] > 0, group
    plain = run([commhost, "status", "--master", master, "--store", "torch_tcp"], 30)
    assert plain.returncode == 0 and plain.stdout.startswith("2 ranks ok"), (plain.stdout, plain.stderr)
    print(plain.stdout.splitlines()[0])

    start = time.time()
    wrong = run([commhost, "status", "--master", master], 60)
    assert wrong.returncode != 0 and "--store torch_tcp" in wrong.stderr, (wrong.returncode, wrong.stderr)
    print("without --store torch_tcp: failed in %.1f s, naming the flag" % (time.time() - start))

    dump = run([commhost, "trace", "dump", "--master", master, "--store", "torch_tcp"], 30)
    assert dump.returncode == 0, dump.stderr
    def found():
        return sorted(f for f in os.listdir(dumps) if f.endswith(".json")) if os.path.isdir(dumps) else []

    deadline = time.time() + 20
    while time.time() < deadline and len(found()) < 2:
        time.sleep(0.2)
    found = found()
    assert len(found) == 2, found
    print("trace dump: both ranks dumped (%s)" % ", ".join(found))


def check_metrics(stderr_path, job):
    """The launcher's --metrics endpoint: both ranks' records and metrics, from torch's store."""
    deadline = time.time() + 30
    url = None
    while url is None:
        found = re.search(r"metrics at (http://127\.0\.0\.1:[0-9]+)/metrics", open(stderr_path).read())
        url = found.group(1) if found else None
        if url is None and (job.poll() is not None or time.time() > deadline):
            sys.exit("the launcher printed no metrics line:\n" + open(stderr_path).read())
        time.sleep(0.1)
    deadline = time.time() + 30
    while True:
        with urllib.request.urlopen(url + "/status.json", timeout=10) as r:
            ranks = json.loads(r.read())["ranks"]
        if sorted(r["rank"] for r in ranks) == [0, 1] and all(r["groups"] for r in ranks):
            break
        if time.time() > deadline:
            sys.exit("--metrics never showed both ranks: %s" % ranks)
        time.sleep(0.5)
    assert all(r["groups"][0]["name"] == "main" for r in ranks), ranks
    with urllib.request.urlopen(url + "/metrics", timeout=10) as r:
        text = r.read().decode()
    for rank in (0, 1):
        assert re.search(r'^commhost_rank_info\{[^}]*rank="%d"' % rank, text, re.M), text[:2000]
    print("--metrics --store torch_tcp: both ranks at %s/status.json and /metrics" % url)


def run_job(commhost, name, command, metrics):
    with tempfile.TemporaryDirectory() as outdir:
        dumps = os.path.join(outdir, "dumps")
        env = dict(os.environ)
        env.pop("COMMHOST_BIN", None)
        config = os.path.join(outdir, "status.yaml")
        with open(config, "w") as f:
            f.write("backends: { gloo: { options: { threads: 1 } } }\n"
                    "routes: [{ device: cpu, backend: gloo }]\n"
                    "supervisor: { heartbeat: { interval: 200ms }, flight_recorder: { dump_dir: %s } }\n" % dumps)
        env["COMMHOST_CONFIG"] = config
        stderr_path = os.path.join(outdir, "launcher.err")
        with open(stderr_path, "w") as err:
            job = subprocess.Popen(command + [os.path.abspath(__file__), "--worker", outdir], env=env, stderr=err)
        print("== %s" % name)
        try:
            wait_for(os.path.join(outdir, "master"), 60, job)
            master = open(os.path.join(outdir, "master")).read()
            print("the ranks use torch's store at", master)
            check(commhost, master, dumps)
            if metrics:
                check_metrics(stderr_path, job)
        finally:
            open(os.path.join(outdir, "stop"), "w").close()
            try:
                rc = job.wait(timeout=60)
            except subprocess.TimeoutExpired:
                job.kill()
                rc = "killed after the stop file"
            sys.stderr.write(open(stderr_path).read())
        if rc != 0:
            sys.exit("the %s launcher exited %s" % (name, rc))


def main():
    if len(sys.argv) > 2 and sys.argv[1] == "--worker":
        worker(sys.argv[2])
        return
    commhost = os.environ["COMMHOST_BIN"]
    for name, command, metrics in launchers(commhost):
        run_job(commhost, name, command, metrics)
    print("ok")


if __name__ == "__main__":
    main()
