# SPDX-License-Identifier: Apache-2.0
"""Shared by the torch backend tests: run a test file as a real 2-rank job.

A test file calls `launch_or_run(worker)`. Started by ctest (no RANK in the environment),
it re-runs itself under `$COMMHOST_BIN run -n WORLD [-c CONFIG] -- python3 FILE ARGS`,
which starts one process per rank with RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT set;
the ranks then init_process_group("commhost", init_method="env://"). torch's TCPStore
serves on MASTER_PORT: the commhost backend rendezvous through torch's store and never
opens commhost's own (`store:` of the config), so the port is not contended.
"""
import argparse
import os
import subprocess
import sys


def parse_args(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("--config", default="", help="commhost config (COMMHOST_CONFIG); '' = embedded default")
    parser.add_argument("--world", type=int, default=2)
    parser.add_argument("--timeout", type=int, default=240, help="seconds the whole job may take")
    return parser.parse_known_args(argv)[0]


def launch_or_run(worker, script):
    args = parse_args()
    if "RANK" in os.environ:
        # A rank still running shortly before the job's limit prints every thread's Python
        # stack, so a hang says where it is.
        import faulthandler

        faulthandler.dump_traceback_later(max(5, args.timeout - 15), exit=False)
        worker(args)
        return
    binary = os.environ.get("COMMHOST_BIN")
    if not binary:
        sys.exit("COMMHOST_BIN is unset: run through ctest, or set it to build/bin/commhost")
    cmd = [binary, "run", "-n", str(args.world)]
    if args.config:
        cmd += ["-c", args.config]
    cmd += ["--", sys.executable, os.path.abspath(script)] + sys.argv[1:]
    print("launching:", " ".join(cmd), flush=True)
    # COMMHOST_* variables are config overrides to a rank: keep the test's own out.
    env = {k: v for k, v in os.environ.items() if k != "COMMHOST_BIN"}
    sys.exit(run_job(cmd, env, args.timeout))


def run_job(cmd, env, timeout, **kwargs):
    """Runs `commhost run ...`; past `timeout` it is stopped with SIGTERM, which stops the
    ranks too (SIGKILL would leave them running)."""
    proc = subprocess.Popen(cmd, env=env, **kwargs)
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
        sys.exit("the job did not finish within %d s: %s" % (timeout, " ".join(cmd)))
