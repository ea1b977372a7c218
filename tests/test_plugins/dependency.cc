// SPDX-License-Identifier: Apache-2.0
// A library the needsdep plugin links to, deliberately placed where it is not found.
extern "C" __attribute__((visibility("default"))) int commhost_test_dependency_value() { return 7; }
