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
import inspect
import os
import re

import torch
import torch.distributed as dist
from torch.distributed.constants import default_pg_timeout

from . import _torch

__all__ = ["BACKEND", "ProcessGroupCommhost", "commhost_group", "create_process_group", "monitored_barrier"]

BACKEND = "commhost"
ProcessGroupCommhost = _torch.ProcessGroupCommhost

# torch 2.x registers a backend per device type and puts it under a ProcessGroup of its
# own; torch 1.13's register_backend has no devices and uses the backend as the group.
_PER_DEVICE = "devices" in inspect.signature(dist.Backend.register_backend).parameters


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


def commhost_group(group=None):
    """The ProcessGroupCommhost behind a torch group on backend "commhost" (the default
    group when None): its commhost config, backends and seq, and the ops torch's Python
    admits for gloo only. ValueError for a group of another backend."""
    if group is None:
        # torch 1.13 has no public accessor for the default group object.
        from torch.distributed.distributed_c10d import _get_default_group

        group = _get_default_group()
    if isinstance(group, ProcessGroupCommhost):
        return group
    if _PER_DEVICE and isinstance(group, dist.ProcessGroup):
        try:
            backend = group._get_backend(torch.device("cpu"))
        except RuntimeError:
            backend = None  # no cpu backend: refused below, naming the group
        if isinstance(backend, ProcessGroupCommhost):
            return backend
    raise ValueError(
        "commhost_group: %r is not a commhost process group (backend %r); pass a group made by "
        "init_process_group(\"commhost\") or new_group(backend=\"commhost\")"
        % (group, dist.get_backend(group) if isinstance(group, dist.ProcessGroup) else type(group).__name__)
    )


def monitored_barrier(group=None, timeout=None, wait_all_ranks=False):
    """torch.distributed.monitored_barrier for backend "commhost" (torch's own refuses every
    backend but gloo): rank 0 waits for each rank in turn, up to `timeout` (a timedelta;
    torch's default process-group timeout when None), and the error names the first rank
    that did not arrive, or every one with wait_all_ranks=True."""
    commhost_group(group).monitored_barrier(
        timeout if timeout is not None else default_pg_timeout, wait_all_ranks=wait_all_ranks
    )


def _routed_devices():
    """cpu, and cuda when the config routes cuda ops ("cpu:commhost,cuda:nccl" picks per
    device). A config that does not load registers cpu: init_process_group then reports
    the config's problems in full."""
    try:
        return _torch.routed_devices(os.environ.get("COMMHOST_CONFIG", ""))
    except RuntimeError:
        return ["cpu"]


if BACKEND.upper() not in dist.Backend._plugins:
    if _PER_DEVICE:
        dist.Backend.register_backend(BACKEND, create_process_group, extended_api=True, devices=_routed_devices())
    else:
        dist.Backend.register_backend(BACKEND, create_process_group, extended_api=True)
