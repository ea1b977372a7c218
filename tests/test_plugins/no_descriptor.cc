// SPDX-License-Identifier: Apache-2.0
// A shared object that follows the naming convention but exports no descriptor.
extern "C" __attribute__((visibility("default"))) int commhost_not_a_plugin() { return 42; }
