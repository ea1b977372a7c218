# SPDX-License-Identifier: Apache-2.0
"""`import commhost.torch` registers torch.distributed backend "commhost"."""
