# SPDX-License-Identifier: Apache-2.0
"""commhost's timed store waits through torch 1.13's TCPStore (issue 42, item 5).

torch 1.13's TCPStore cannot take back a wait that timed out: the server's late answer is
read by the client's next call, and the socket keeps the wait's short timeout. commhost
waits in 100 ms slices while ranks exchange what they publish at group creation, so a
rank arriving later than that broke its peer's connection: "Stop_waiting response is
expected" (2 starts in 20). Here one client waits as commhost does and times out, the key
then appears, and the same client must go on working: set, get, and a wait that succeeds.
"""
import socket
import sys
import threading
import time

import torch
import torch.distributed as dist

import commhost.torch  # noqa: F401  (registers the backend)
from commhost import _torch


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def bounded(what, fn, seconds=10):
    """fn() on a thread; its result, or AssertionError if it raised or did not return."""
    out = {}

    def body():
        try:
            out["value"] = fn()
        except Exception as e:  # noqa: BLE001 - reported below
            out["error"] = "%s: %s" % (type(e).__name__, e)

    t = threading.Thread(target=body, daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), "%s did not return within %d s" % (what, seconds)
    assert "error" not in out, "%s failed: %s" % (what, out["error"])
    return out.get("value")


def main():
    port = free_port()
    # torch 2.x asks for libuv unless told not to, and Debian 13's torch has none.
    kw = {"use_libuv": False} if int(torch.__version__.split(".")[0]) >= 2 else {}
    server = dist.TCPStore("127.0.0.1", port, 2, True, wait_for_workers=False, **kw)
    client = dist.TCPStore("127.0.0.1", port, 2, False, **kw)
    for round_ in range(3):
        key = "late%d" % round_
        started = time.monotonic()
        try:
            _torch._store_wait(client, [key], 100)
            raise AssertionError("a wait for a key nobody set returned")
        except AssertionError:
            raise
        except Exception as e:  # noqa: BLE001 - commhost's TimeoutError, translated
            assert "timed out" in str(e) or "imeout" in str(e), e
        assert time.monotonic() - started < 5, "a 100 ms wait took %.1f s" % (time.monotonic() - started)
        server.set(key, "now")  # what the server would have answered the timed-out wait with
        time.sleep(0.2)
        bounded("set after a timed-out wait", lambda: client.set("x%d" % round_, "v%d" % round_))
        got = bounded("get after a timed-out wait", lambda: client.get("x%d" % round_))
        assert got == ("v%d" % round_).encode(), got
        bounded("a wait for a present key", lambda: _torch._store_wait(client, [key, "x%d" % round_], 2000))
        assert bounded("get", lambda: client.get(key)) == b"now"
    print("PASS: 3 timed-out waits, the client in step after each")
    return 0


if __name__ == "__main__":
    sys.exit(main())
