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
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _launch import run_job  # noqa: E402

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
env = {k: v for k, v in os.environ.items() if k != "COMMHOST_BIN"}  # not a config override
with tempfile.TemporaryFile("w+") as out:
    rc = run_job(cmd, env, 300, stdout=out, stderr=subprocess.STDOUT)
    out.seek(0)
    text = out.read()
print(text)
assert rc == 0, "the job failed (exit %d)" % rc
want = "%d steps" % args.steps
assert want in text and "parameters identical to gloo's at every step" in text, "no parity line"
