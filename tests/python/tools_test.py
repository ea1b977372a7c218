# SPDX-License-Identifier: Apache-2.0
"""One process, no group: the error classes, plugins(), config_check() against the CLI's
`config check` (same effective YAML, same error text), the tensor bridge's conversions
and refusals, and a world of one from commhost.init()."""
import builtins
import os
import socket
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from harness import CONFIGS, clean_env, expect_raises

import commhost

BIN = os.environ["COMMHOST_BIN"]


def check_errors_classes():
    assert issubclass(commhost.Error, RuntimeError)
    for name in ("ConfigError", "PluginError", "StoreError", "TimeoutError", "AbortedError", "PeerLostError",
                 "InvalidArgument", "BackendError", "NotSupportedError"):
        cls = getattr(commhost, name)
        assert issubclass(cls, commhost.Error) and cls.__module__ == "commhost", name
    assert issubclass(commhost.TimeoutError, builtins.TimeoutError)
    assert issubclass(commhost.InvalidArgument, ValueError)
    assert issubclass(commhost.NotSupportedError, NotImplementedError)


def check_plugins():
    found = {p["name"]: p for p in commhost.plugins()}
    for name, kind in (("gloo", "backend"), ("shm", "backend"), ("tcp", "store")):
        assert name in found and found[name]["kind"] == kind, (name, sorted(found))
    gloo = found["gloo"]
    assert gloo["usable"] and gloo["status"] == "ok" and gloo["version"] and gloo["description"]
    assert gloo["path"].endswith(".so") and "allreduce" in gloo["capabilities"]
    cli = subprocess.run([BIN, "plugins", "list"], capture_output=True, text=True, check=True).stdout
    for p in found.values():
        assert p["name"] in cli and p["path"] in cli, p


def check_config_check(tmp):
    c = commhost.config_check(CONFIGS / "shm.yaml", overrides={"group.timeout": "12s"})
    assert c["source"].endswith("shm.yaml") and c["backends"] == {"gloo": "gloo", "shm": "shm"}
    assert c["store"] == "tcp" and c["group"] == "main" and c["timeout"] == 12.0
    assert "shm" in c["routes"] and "gloo" in c["routes"] and len(c["hash"]) == 16
    cli = subprocess.run([BIN, "config", "check", str(CONFIGS / "shm.yaml"), "--set", "group.timeout=12s"],
                         capture_output=True, text=True, check=True).stdout
    assert c["effective_yaml"] in cli, (c["effective_yaml"], cli)
    assert c["hash"] in cli, (c["hash"], cli)
    for line in c["routes"].splitlines():
        assert line in cli, line
    assert commhost.config_check()["source"] == "<embedded default>"
    assert commhost.config_check(CONFIGS / "gloo.yaml", ["logging.level=debug"])["effective_yaml"].count("debug")

    bad = Path(tmp) / "bad.yaml"
    bad.write_text("group:\n  name: main\n  timeout: soon\nbackends:\n  gloo: { plugin: glooo }\n")
    e = expect_raises(commhost.ConfigError, lambda: commhost.config_check(bad), f"{bad}:3", f"{bad}:5")
    assert e.code == "config" and isinstance(e, RuntimeError)
    cli = subprocess.run([BIN, "config", "check", str(bad)], capture_output=True, text=True)
    assert cli.returncode != 0 and str(e) in cli.stderr, (str(e), cli.stderr)
    expect_raises(commhost.ConfigError, lambda: commhost.config_check("routes: [\n"), "<python>")
    expect_raises(commhost.ConfigError, lambda: commhost.config_check(Path(tmp) / "missing.yaml"), "missing.yaml")
    expect_raises(commhost.InvalidArgument, lambda: commhost.config_check(None, ["no-equals"]), "key=value")


def check_bridge():
    d = commhost._describe_tensor
    assert d(np.zeros((2, 3), np.float32)) == "f32[2, 3] on cpu"
    for dt, name in ((np.bool_, "bool"), (np.int8, "i8"), (np.uint8, "u8"), (np.int32, "i32"), (np.int64, "i64"),
                     (np.float16, "f16"), (np.float64, "f64")):
        assert d(np.zeros(4, dt)).startswith(name + "["), (dt, d(np.zeros(4, dt)))
    assert d(np.zeros((3, 4), np.float32)[1]) == "f32[4] on cpu"  # a contiguous row view
    a = np.zeros((3, 4), np.float32)
    assert commhost._data_ptr(a) == a.ctypes.data and commhost._data_ptr(a[1]) == a[1].ctypes.data  # no copy
    assert d(np.zeros((), np.int64)) == "i64[] on cpu"
    expect_raises(commhost.InvalidArgument, lambda: d(np.zeros((3, 4), np.float32)[:, 1]), "non-contiguous",
                  "strides (16) bytes")
    expect_raises(commhost.InvalidArgument, lambda: d(np.zeros(2, ">f4")), "byte order")
    expect_raises(commhost.InvalidArgument, lambda: d("abc"), "is a str")
    ro = np.zeros(2)
    ro.setflags(write=False)
    assert d(ro) == "f64[2] on cpu"
    expect_raises(commhost.InvalidArgument, lambda: d(ro, writable=True), "read-only")


def check_world_of_one(tmp):
    os.environ.update(clean_env(tmp))
    for k in [k for k in os.environ if k.startswith("COMMHOST_") and k != "COMMHOST_BIN"]:
        del os.environ[k]
    with socket.socket() as s:  # a free port for the store rank 0 serves
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    os.environ.update(RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    expect_raises(commhost.ConfigError, lambda: commhost.init(CONFIGS / "nope.yaml"), "nope.yaml")
    with commhost.init(CONFIGS / "gloo.yaml", overrides={"logging.level": "warn", "group.timeout": "9s"}) as pg:
        assert (pg.rank, pg.size, pg.generation) == (0, 1, 0)
        assert "timeout: 9s" in pg.config_yaml
        x = np.arange(5, dtype=np.float32)
        assert pg.allreduce(x).wait() and np.array_equal(x, np.arange(5, dtype=np.float32))
        assert pg.reconfigure(CONFIGS / "shm.yaml")["generation"] == 1
        assert "timeout: 9s" in pg.config_yaml  # the init overrides apply to the swapped-in config too
        pg.allreduce(x, op="max").wait()


if __name__ == "__main__":
    check_errors_classes()
    check_plugins()
    with tempfile.TemporaryDirectory(prefix="commhost-py-") as tmp:
        check_config_check(tmp)
        check_bridge()
        check_world_of_one(tmp)
    print("all checks passed")
