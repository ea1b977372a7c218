// SPDX-License-Identifier: Apache-2.0
// What the tcp store client writes while it tries to reach the server, for `commhost
// run` (tools/cli/launcher.cc), which reads the ranks' output to name the ranks that
// never reached the store. The launcher is another process and the ranks may be any
// program, so these lines, not the StoreError itself, are what it can see; both sides
// use these constants so the wording cannot drift apart.
#pragma once

namespace commhost::tcpstore {

// A progress warning: "still waiting for the store at HOST:PORT after Ns (...)".
constexpr const char* kStillWaitingLine = "still waiting for the store at ";
// After progress warnings: "reached the store at HOST:PORT after Ns".
constexpr const char* kReachedLine = "reached the store at ";
// The StoreError's message when the client gives up, as the rank prints it.
constexpr const char* kGaveUpLine = "cannot connect to the store at ";

}  // namespace commhost::tcpstore
