// SPDX-License-Identifier: Apache-2.0
#include "template_backend.h"

#include <algorithm>
#include <cstring>

#include "commhost/errors.h"

namespace commhost::templ {

namespace {

// Ops that finish inside the call return a CompletedWork with their output tensors;
// ops finished later by the backend's own threads return an AsyncWork and call
// finish(outputs) or fail(error) on it exactly once (see commhost/work.h).
WorkPtr done(const OpContext& ctx, std::vector<Tensor> outputs) {
  return std::make_shared<CompletedWork>(ctx, std::move(outputs));
}

// A rank's post for one op: "<seq>/<rank>" under the backend's private store prefix.
std::string key(uint64_t seq, int rank) { return std::to_string(seq) + "/" + std::to_string(rank); }

}  // namespace

std::unique_ptr<Backend> create(const Options& options, const BackendContext& ctx) {
  // A backend that cannot serve this group refuses here, with a message that says what
  // to do instead (throw ConfigError or PluginError). A networked backend would also
  // rendezvous with its peers here through ctx.store (private to this backend in this
  // group), e.g. rank 0 sets its address and the others get it.
  return std::make_unique<TemplateBackend>(ctx, options);
}

TemplateBackend::TemplateBackend(const BackendContext& ctx, const Options& options) : ctx_(ctx), options_(options) {
  if (options_.verbose && ctx_.logger)
    ctx_.logger->info("template backend ready: rank " + std::to_string(ctx_.rank) + " of " +
                      std::to_string(ctx_.worldSize) + ", " + std::to_string(options_.threads) + " thread(s)");
}

std::vector<Bytes> TemplateBackend::exchange(const OpContext& ctx, const Tensor& tensor, bool withData, int dataFrom) {
  // A contribution is the byte count this rank passed (8 bytes), then, if it carries
  // data, the bytes. Every rank publishes one for every op, so that every rank can check
  // every other's size, and so that reading a peer's post proves the peer is done with
  // the previous op.
  if (options_.verbose && ctx_.logger) ctx_.logger->info(ErrorContext::of(ctx).format() + "start");
  const uint64_t bytes = tensor.nbytes();
  // Sized once and filled with memcpy (GCC 12 warned -Wstringop-overread on a vector
  // insert after the 8-byte header, a false positive of its inlining).
  Bytes mine(sizeof bytes + (withData ? bytes : 0));
  std::memcpy(mine.data(), &bytes, sizeof bytes);
  if (withData && bytes > 0) std::memcpy(mine.data() + sizeof bytes, tensor.data(), bytes);
  ctx_.store->set(key(ctx.seq, ctx_.rank), mine);

  std::vector<Bytes> posts(ctx_.worldSize);
  for (int peer = 0; peer < ctx_.worldSize; ++peer) {
    if (peer == ctx_.rank) continue;
    const std::string k = key(ctx.seq, peer);
    ctx_.store->wait({k}, ctx.timeout);  // throws a timeout naming the key
    posts[peer] = ctx_.store->get(k);
  }
  // Every peer has posted this op, so every peer has finished the previous one: its
  // reads of this rank's previous post are over.
  if (lastSeq_ != 0) ctx_.store->deleteKey(key(lastSeq_, ctx_.rank));
  lastSeq_ = ctx.seq;

  // Ranks that disagree on the size must all fail, never reduce garbage: every rank sees
  // the same posts, so every rank raises the same error.
  for (int peer = 0; peer < ctx_.worldSize; ++peer) {
    if (peer == ctx_.rank) continue;
    uint64_t theirs = 0;
    if (posts[peer].size() >= sizeof theirs) std::memcpy(&theirs, posts[peer].data(), sizeof theirs);
    const bool carries = withData && (dataFrom < 0 || dataFrom == peer);
    if (theirs != bytes || (carries && posts[peer].size() != sizeof theirs + bytes))
      raise(ErrorCode::InvalidArgument, ErrorContext::of(ctx, peer),
            "rank " + std::to_string(ctx_.rank) + " passed " + std::to_string(bytes) + " bytes but rank " +
                std::to_string(peer) + " passed " + std::to_string(theirs),
            "every rank must pass tensors of the same size to this op");
  }
  return posts;
}

namespace {

// dst = op over ranks, folded in rank order on every rank, so that every rank gets the
// same bits (float addition is not associative: x0 + x1 + x2 and x1 + x0 + x2 can differ).
template <class T> void fold(T* dst, const std::vector<const uint8_t*>& srcs, size_t n, ReduceOp::Kind op) {
  std::vector<T> acc(n);
  for (size_t r = 0; r < srcs.size(); ++r) {
    for (size_t i = 0; i < n; ++i) {
      T v;
      std::memcpy(&v, srcs[r] + i * sizeof v, sizeof v);  // store values need not be aligned
      acc[i] = r == 0 ? v : op == ReduceOp::Max ? std::max(acc[i], v) : acc[i] + v;
    }
  }
  std::memcpy(dst, acc.data(), n * sizeof(T));
}

}  // namespace

WorkPtr TemplateBackend::allreduce(const OpContext& ctx, Tensor& tensor, const AllreduceOptions& opts) {
  const std::vector<Bytes> posts = exchange(ctx, tensor, /*withData=*/true, /*dataFrom=*/-1);
  std::vector<const uint8_t*> srcs;
  for (int r = 0; r < ctx_.worldSize; ++r)
    srcs.push_back(r == ctx_.rank ? static_cast<const uint8_t*>(tensor.data()) : posts[r].data() + sizeof(uint64_t));
  // The routes send only what kCapabilities lists here, so the data is f32 or f64 and
  // the op Sum or Max.
  const size_t n = static_cast<size_t>(tensor.numel());
  if (tensor.dtype() == DType::Float64) fold(static_cast<double*>(tensor.data()), srcs, n, opts.reduceOp.kind);
  else fold(static_cast<float*>(tensor.data()), srcs, n, opts.reduceOp.kind);
  return done(ctx, {tensor});
}

WorkPtr TemplateBackend::broadcast(const OpContext& ctx, Tensor& tensor, const BroadcastOptions& opts) {
  const bool root = ctx_.rank == opts.root;
  const std::vector<Bytes> posts = exchange(ctx, tensor, /*withData=*/root, opts.root);
  if (!root) std::memcpy(tensor.data(), posts[opts.root].data() + sizeof(uint64_t), tensor.nbytes());
  return done(ctx, {tensor});
}

}  // namespace commhost::templ
