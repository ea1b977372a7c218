# SPDX-License-Identifier: Apache-2.0
"""`import commhost.torch` registers torch.distributed backend "commhost".

    import commhost.torch  # noqa: F401
    torch.distributed.init_process_group("commhost", init_method="env://")

Every torch process group on backend "commhost" (the world and each new_group) is a
commhost ProcessGroup created over the store torch hands the backend, so the rendezvous
goes through torch's store (env://, tcp://, file://) and commhost's own `store:` section
is not used. The config is $COMMHOST_CONFIG, else commhost's embedded default (every CPU
op through Gloo); `commhost run -c FILE` sets COMMHOST_CONFIG, and COMMHOST_OVERRIDES /
COMMHOST_<KEY> variables apply as they do for any commhost rank.

Timeouts: the config's group.timeout bounds each op, unless init_process_group (or
new_group) was given a timeout other than torch's default; that one then wins.
"""
import os
import re

import torch.distributed as dist
from torch.distributed.constants import default_pg_timeout

from . import _torch

__all__ = ["BACKEND", "ProcessGroupCommhost", "create_process_group"]

BACKEND = "commhost"
ProcessGroupCommhost = _torch.ProcessGroupCommhost


def create_process_group(backend_options, pg_options=None):
    """The backend's creator (torch's extended API): one commhost group per torch group."""
    del pg_options  # the commhost config holds every option
    overrides = []
    timeout = backend_options.timeout
    if timeout is not None and timeout != default_pg_timeout:
        overrides.append("group.timeout=%dms" % max(1, int(timeout.total_seconds() * 1000)))
    # init_process_group passes no ranks for the world group; new_group names its members.
    suffix = ""
    if backend_options.global_ranks_in_group:
        suffix = "torch" + re.sub(r"[^A-Za-z0-9_]", "_", str(backend_options.group_id))
    return _torch.create_group(
        backend_options.store,
        backend_options.group_rank,
        backend_options.group_size,
        os.environ.get("COMMHOST_CONFIG", ""),
        overrides,
        suffix,
    )


if BACKEND.upper() not in dist.Backend._plugins:
    dist.Backend.register_backend(BACKEND, create_process_group, extended_api=True)
