// SPDX-License-Identifier: Apache-2.0
// Joining an shm group through the backend's store: every rank proves it runs on the
// same host, then group rank 0 creates the segment and the others map it by name.
//
// Threading: runs once, on the thread that creates the backend.
#pragma once

#include <memory>

#include "commhost/sdk/plugin.h"
#include "segment.h"

namespace commhost::shm {

// Publishes this rank's identity and compares every rank's; throws PluginError naming the
// ranks that run elsewhere (shm cannot reach them).
void checkSameHost(const BackendContext& ctx);
// Rank 0 creates the segment and publishes its name; the others map it. Every rank
// writes its pid into its control block (for liveness checks), and rank 0 unlinks the
// name once every rank has mapped it, so nothing stays in /dev/shm after this returns.
std::unique_ptr<Segment> connectSegment(const BackendContext& ctx, const SegmentLayout& layout,
                                        std::chrono::milliseconds timeout);

}  // namespace commhost::shm
