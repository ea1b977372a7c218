# SPDX-License-Identifier: Apache-2.0
"""commhost: a host for collective communication (Python surface).

`import commhost` gives the host library's API on NumPy arrays and __dlpack__ objects;
`import commhost.torch` registers the torch.distributed backend "commhost".

    pg = commhost.init()                 # RANK, WORLD_SIZE, MASTER_ADDR/PORT, COMMHOST_CONFIG
    x = numpy.ones(4, numpy.float32)
    pg.allreduce(x).wait()               # in place: x == size
    pg.reconfigure("configs/shm.yaml")   # hot swap, all ranks together

Every op returns a Work (wait(timeout=None), is_completed(), exception()); the arrays
passed stay alive until it completes. Errors are commhost.Error subclasses carrying the
C++ message: ConfigError, PluginError, StoreError, TimeoutError, AbortedError,
PeerLostError, InvalidArgument, BackendError, NotSupportedError.
"""
import atexit as _atexit

from ._C import (  # noqa: F401
    __version__,
    AbortedError,
    BackendError,
    ConfigError,
    Error,
    InvalidArgument,
    NotSupportedError,
    PeerLostError,
    PluginError,
    ProcessGroup,
    ReduceOp,
    StoreError,
    TimeoutError,
    Work,
    config_check,
    dump_flight_recorder,
    init,
    launch_info,
    plugins,
)
from . import _C
from ._C import _data_ptr, _describe_tensor  # noqa: F401  (what commhost sees of an array; for tests)

# Groups still alive at exit are shut down first, while their backends' threads can still
# hand arrays back to Python; destroying them during interpreter teardown could not.
_atexit.register(_C._shutdown_all)

__all__ = [
    "AbortedError", "BackendError", "ConfigError", "Error", "InvalidArgument", "NotSupportedError",
    "PeerLostError", "PluginError", "ProcessGroup", "ReduceOp", "StoreError", "TimeoutError", "Work",
    "config_check", "dump_flight_recorder", "init", "launch_info", "plugins",
]
