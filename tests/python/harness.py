# SPDX-License-Identifier: Apache-2.0
"""Runs a test script's ranks as real processes under `commhost run`.

A test script calls harness.main(worker, [(nranks, config), ...]). Started by ctest (no
--worker argument), it launches itself once per entry as
    $COMMHOST_BIN run -n N -c CONFIG -- python3 SCRIPT --worker ARGS...
and checks that every rank printed its "PASS rank R" line; started as a rank, it runs
worker(pg, args) on commhost.init()'s group and prints that line.
"""
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CONFIGS = REPO / "configs"


def clean_env(tmp):
    env = {k: v for k, v in os.environ.items() if not k.startswith("COMMHOST_")}
    # Flight-recorder dumps (default dump_dir: $TMPDIR/commhost-traces-UID) stay in this run's dir.
    env["TMPDIR"] = str(tmp)
    return env


def launch(script, nranks, config, args=(), sets=(), timeout=240, passes=None):
    """`passes`: the ranks expected to print PASS (default: all); a worker that shrinks its
    group prints its rank after the shrink."""
    commhost = os.environ["COMMHOST_BIN"]
    with tempfile.TemporaryDirectory(prefix="commhost-py-") as tmp:
        cmd = [commhost, "run", "-n", str(nranks), "-c", str(config), "--set", "logging.level=warn"]
        for s in sets:
            cmd += ["--set", s]
        cmd += ["--", sys.executable, str(script), "--worker", *map(str, args)]
        print("$", " ".join(cmd), flush=True)
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout,
                              env=clean_env(tmp))
    print(proc.stdout, flush=True)
    if proc.returncode != 0:
        sys.exit(f"FAIL: {Path(script).name} at {nranks} ranks with {Path(config).name}: exit {proc.returncode}")
    passed = sorted(line.split("PASS rank ")[1].strip() for line in proc.stdout.splitlines() if "PASS rank " in line)
    want = sorted(str(r) for r in (range(nranks) if passes is None else passes))
    if passed != want:
        sys.exit(f"FAIL: {Path(script).name}: expected PASS lines from ranks {want}, got {passed}")
    return proc.stdout


def main(worker, runs):
    if "--worker" in sys.argv:
        import commhost
        args = sys.argv[sys.argv.index("--worker") + 1:]
        pg = commhost.init()
        worker(pg, args)
        print(f"PASS rank {pg.rank}", flush=True)
        return
    for run in runs:
        nranks, config = run[0], run[1]
        args = run[2] if len(run) > 2 else ()
        launch(sys.argv[0], nranks, config, args)
    print("all runs passed")


def expect_raises(cls, fn, *needles):
    """Calls fn, requires it to raise `cls` whose message holds every needle; returns the error."""
    try:
        fn()
    except cls as e:
        for n in needles:
            assert n in str(e), f"expected {n!r} in the {cls.__name__} message: {e}"
        return e
    raise AssertionError(f"expected {cls.__name__}, nothing was raised")
