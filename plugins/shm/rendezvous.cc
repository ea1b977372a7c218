// SPDX-License-Identifier: Apache-2.0
#include "rendezvous.h"

#include <unistd.h>

#include "commhost/errors.h"
#include "commhost/sdk/backend_sdk.h"

namespace commhost::shm {
namespace {

std::string text(const Bytes& b) { return std::string(b.begin(), b.end()); }

}  // namespace

void checkSameHost(const BackendContext& ctx) {
  const std::string mine = hostIdentity();
  const std::vector<std::string> all = exchangeAll(ctx, "host", mine, "shm rendezvous");
  std::string elsewhere;
  for (int r = 0; r < ctx.worldSize; ++r)
    if (all[r] != mine) elsewhere += "\n  rank " + std::to_string(r) + " runs on " + all[r];
  if (!elsewhere.empty())
    raise(ErrorCode::Plugin, ErrorContext::of(ctx, "shm rendezvous"),
          "every rank of an shm group must run on one host; this rank runs on " + mine + ", but" + elsewhere,
          "\nRoute these collectives to a multi-host backend (e.g. gloo), or use shm only in per-host subgroups "
          "(the hier backend)");
}

std::unique_ptr<Segment> connectSegment(const BackendContext& ctx, const SegmentLayout& layout,
                                        std::chrono::milliseconds timeout) {
  std::unique_ptr<Segment> segment;
  if (ctx.rank == 0) {
    segment = Segment::create(segmentName(ctx.groupName, ctx.backendName), layout);
    ctx.store->set("segment", toBytes(segment->name()));
  } else {
    ctx.store->wait({"segment"}, timeout);
    segment = Segment::open(text(ctx.store->get("segment")), layout);
  }
  segment->control(ctx.rank).pid.store(static_cast<int64_t>(::getpid()), std::memory_order_release);
  ctx.store->set("mapped/" + std::to_string(ctx.rank), toBytes("1"));
  if (ctx.rank == 0) {
    std::vector<std::string> keys;
    for (int r = 1; r < ctx.worldSize; ++r) keys.push_back("mapped/" + std::to_string(r));
    try {
      if (!keys.empty()) ctx.store->wait(keys, timeout);
    } catch (const Error& e) {
      raise(ErrorCode::PeerLost, ErrorContext::of(ctx, "shm rendezvous"),
            "not every rank mapped the shared memory " + segment->name() + ": " + e.what(),
            "Check that every rank started and runs on this host");
    }
    segment->unlink();  // every rank holds a mapping: the name is no longer needed
  }
  return segment;
}

}  // namespace commhost::shm
