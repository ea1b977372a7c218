# SPDX-License-Identifier: Apache-2.0
"""DDP parity: tools/examples/ddp_train.py --compare gloo under `commhost run -n 2`.

The example trains the same model from the same seed on the same data twice in each
rank, once over backend "commhost" (the config given with --config) and once over a torch
gloo group, and exits non-zero unless the parameters are identical after every step.
"""
import argparse
import os
import subprocess
import sys

parser = argparse.ArgumentParser()
parser.add_argument("--config", default="")
parser.add_argument("--example", required=True)
parser.add_argument("--steps", type=int, default=30)
args = parser.parse_args()

cmd = [os.environ["COMMHOST_BIN"], "run", "-n", "2"]
if args.config:
    cmd += ["-c", args.config]
cmd += ["--", sys.executable, args.example, "--compare", "gloo", "--steps", str(args.steps)]
print("running:", " ".join(cmd), flush=True)
proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)
print(proc.stdout)
assert proc.returncode == 0, "the job failed (exit %d)" % proc.returncode
want = "%d steps" % args.steps
assert want in proc.stdout and "parameters identical to gloo's at every step" in proc.stdout, "no parity line"
