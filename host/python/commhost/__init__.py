# SPDX-License-Identifier: Apache-2.0
"""commhost: a host for collective communication (Python surface).

`import commhost` gives the host library's API on NumPy arrays and __dlpack__ objects;
`import commhost.torch` registers the torch.distributed backend "commhost".
"""
from ._C import __version__  # noqa: F401
