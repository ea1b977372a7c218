// SPDX-License-Identifier: Apache-2.0
// Where the gloo backend's threads run when a host has fewer CPUs than its ranks' busy
// threads (each rank: an op worker and Gloo's transport thread).
//
// Why: Gloo's transport thread only try-locks a connection (tcp::Pair::handleEvents); when
// an op's thread holds the lock, the event stays ready and epoll_wait returns at once, so
// the transport thread spins until the lock is free. On loopback, the op thread's write
// wakes the peer's transport thread on the writer's own CPU, which preempts the writer
// while it holds its lock, and the writer's own transport thread then spins on the other
// CPU. With 2 ranks on 2 CPUs the scheduler falls into this state (each CPU hosting one
// rank's worker and the other rank's transport thread) for about a second at a time:
// 2-4x slower ops, with both transport threads at 50-75% CPU. In the other state it
// settles into (workers on one CPU, transport threads on the other) this never happens.
// Splitting the CPUs keeps the job in that state: transport threads on the upper half of
// the CPUs this process may use, op workers on the lower half.
//
// Threading: plan() is pure; pinCurrentThread() changes the calling thread only.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace commhost::gloo_backend {

enum class ThreadPlacement {
  Auto,   // split when the ranks sharing the CPUs have fewer than two each, else leave it to the scheduler
  Split,  // always split (when there are at least two CPUs)
  Off,    // never pin
};

struct Placement {
  std::vector<int> transport;    // CPUs for Gloo's transport thread
  std::vector<int> workers;      // CPUs for the op workers (never the caller's thread)
  std::string describe() const;  // "transport thread on CPU 1, op workers on CPU 0"
};

// The split for `ranksSharing` ranks of the group sharing `cpus` (allowedCpus() in the
// host SDK; ranksSharingCpus()), or nothing
// (leave placement to the scheduler): Off, fewer than two CPUs, or Auto with at least
// two CPUs per rank.
std::optional<Placement> plan(ThreadPlacement mode, int ranksSharing, const std::vector<int>& cpus);

// Restricts the calling thread to `cpus` (threads it creates inherit it). False, with
// errno set, when the kernel refuses (e.g. a CPU outside this process's cpuset).
bool pinCurrentThread(const std::vector<int>& cpus);

// "0-3,6" for a CPU list, as taskset and /proc print them.
std::string cpuList(const std::vector<int>& cpus);

}  // namespace commhost::gloo_backend
