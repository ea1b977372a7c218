#include "template_backend.h"

#include "commhost/errors.h"

namespace commhost::templ {

namespace {

// Ops that finish inside the call return a CompletedWork with their output tensors;
// ops finished later by the backend's own threads return an AsyncWork and call
// finish(outputs) or fail(error) on it exactly once (see commhost/work.h).
WorkPtr done(const OpContext& ctx, std::vector<Tensor> outputs) {
  return std::make_shared<CompletedWork>(ctx, std::move(outputs));
}

[[noreturn]] void notImplemented(const char* op) {
  throw InvalidArgument(std::string(op) +
                        ": the template backend does not implement this op (it declares only allreduce, "
                        "broadcast and barrier); route it to another backend");
}

}  // namespace

std::unique_ptr<Backend> create(const OptionValues& options, const BackendContext& ctx) {
  // Refuse what this backend cannot serve with a message that says what to do instead.
  if (ctx.worldSize != 1)
    throw ConfigError("backend '" + ctx.backendName + "' uses the template plugin, which serves groups of one rank, "
                      "but group " + ctx.groupName + " has " + std::to_string(ctx.worldSize) +
                      " ranks; route multi-rank groups to a networked backend");
  // A real backend would rendezvous with its peers here through ctx.store (private to
  // this backend in this group), e.g. rank 0 sets an address and the others get it.
  return std::make_unique<TemplateBackend>(options.getInt("threads"), options.getBool("verbose"), ctx.logger);
}

TemplateBackend::TemplateBackend(int64_t threads, bool verbose, std::shared_ptr<Logger> logger)
    : threads_(threads), verbose_(verbose), logger_(std::move(logger)) {
  if (verbose_ && logger_) logger_->info("template backend ready with " + std::to_string(threads_) + " thread(s)");
}

void TemplateBackend::begin(const OpContext& ctx) const {
  if (aborted_) throw AbortedError(std::string(opName(ctx.op)) + " seq " + std::to_string(ctx.seq) +
                                   ": the template backend was aborted; create a new group");
  if (verbose_ && logger_) logger_->info(std::string(opName(ctx.op)) + " seq " + std::to_string(ctx.seq));
}

WorkPtr TemplateBackend::allreduce(const OpContext& ctx, Tensor& tensor, const AllreduceOptions& opts) {
  begin(ctx);
  // With one rank, Sum and Max of a single contribution are the tensor itself, so there
  // is nothing to compute. A real backend exchanges data with its peers here and
  // combines f32 elements with + (Sum) or std::max (Max). The host already refused any
  // dtype or reduce op not listed in kCapabilities, so this switch is belt and braces.
  switch (opts.reduceOp.kind) {
    case ReduceOp::Sum:
    case ReduceOp::Max:
      break;
    default:
      throw InvalidArgument(std::string("allreduce seq ") + std::to_string(ctx.seq) + ": reduce op " +
                            reduceOpName(opts.reduceOp.kind) + " is not supported by the template backend");
  }
  return done(ctx, {tensor});
}

WorkPtr TemplateBackend::broadcast(const OpContext& ctx, Tensor& tensor, const BroadcastOptions&) {
  begin(ctx);
  // The only rank is the root: the tensor already holds the broadcast value.
  return done(ctx, {tensor});
}

WorkPtr TemplateBackend::barrier(const OpContext& ctx, const BarrierOptions&) {
  begin(ctx);
  return done(ctx, {});  // no peers to wait for
}

void TemplateBackend::abort(const std::string& reason) {
  aborted_ = true;
  if (logger_) logger_->warn("template backend aborted: " + reason);
}

void TemplateBackend::shutdown() {}

// Everything below is outside kCapabilities. The ProcessGroup never calls these, and a
// direct caller gets an error naming the op.
WorkPtr TemplateBackend::allreduceCoalesced(const OpContext&, std::vector<Tensor>&, const AllreduceCoalescedOptions&) {
  notImplemented("allreduce_coalesced");
}
WorkPtr TemplateBackend::reduce(const OpContext&, Tensor&, const ReduceOptions&) { notImplemented("reduce"); }
WorkPtr TemplateBackend::allgather(const OpContext&, std::vector<Tensor>&, const Tensor&, const AllgatherOptions&) {
  notImplemented("allgather");
}
WorkPtr TemplateBackend::allgatherIntoTensor(const OpContext&, Tensor&, const Tensor&, const AllgatherOptions&) {
  notImplemented("allgather_into_tensor");
}
WorkPtr TemplateBackend::allgatherCoalesced(const OpContext&, std::vector<std::vector<Tensor>>&,
                                            const std::vector<Tensor>&, const AllgatherOptions&) {
  notImplemented("allgather_coalesced");
}
WorkPtr TemplateBackend::gather(const OpContext&, std::vector<Tensor>&, const Tensor&, const GatherOptions&) {
  notImplemented("gather");
}
WorkPtr TemplateBackend::scatter(const OpContext&, Tensor&, const std::vector<Tensor>&, const ScatterOptions&) {
  notImplemented("scatter");
}
WorkPtr TemplateBackend::reduceScatter(const OpContext&, Tensor&, const std::vector<Tensor>&,
                                       const ReduceScatterOptions&) {
  notImplemented("reduce_scatter");
}
WorkPtr TemplateBackend::reduceScatterTensor(const OpContext&, Tensor&, const Tensor&, const ReduceScatterOptions&) {
  notImplemented("reduce_scatter_tensor");
}
WorkPtr TemplateBackend::alltoall(const OpContext&, std::vector<Tensor>&, const std::vector<Tensor>&,
                                  const AlltoallOptions&) {
  notImplemented("alltoall");
}
WorkPtr TemplateBackend::alltoallSingle(const OpContext&, Tensor&, const Tensor&, const AlltoallSingleOptions&) {
  notImplemented("alltoall_single");
}
WorkPtr TemplateBackend::send(const OpContext&, const Tensor&, int, const SendOptions&) { notImplemented("send"); }
WorkPtr TemplateBackend::recv(const OpContext&, Tensor&, int, const RecvOptions&) { notImplemented("recv"); }
WorkPtr TemplateBackend::recvAnySource(const OpContext&, Tensor&, const RecvOptions&) {
  notImplemented("recv_any_source");
}

}  // namespace commhost::templ
