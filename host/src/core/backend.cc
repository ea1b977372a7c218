// SPDX-License-Identifier: Apache-2.0
// The defaults of Backend (see backend.h): an op a partial backend does not override.
#include "commhost/sdk/backend.h"

#include <unordered_map>

#include "backend_names.h"
#include "commhost/errors.h"
#include "commhost/mutex.h"
#include "commhost/sdk/plugin.h"

namespace commhost {

namespace backend_names {
namespace {
struct Table {
  Mutex mutex;
  std::unordered_map<const Backend*, std::string> names GUARDED_BY(mutex);
};
Table& table() {
  static Table* t = new Table;  // never destroyed: backends may outlive static destruction
  return *t;
}
}  // namespace

void remember(const Backend* backend, const std::string& name) {
  Table& t = table();
  MutexLock lock(&t.mutex);
  t.names[backend] = name;
}

void forget(const Backend* backend) {
  Table& t = table();
  MutexLock lock(&t.mutex);
  t.names.erase(backend);
}

std::string of(const Backend* backend) {
  Table& t = table();
  MutexLock lock(&t.mutex);
  const auto it = t.names.find(backend);
  return it == t.names.end() ? std::string() : it->second;
}
}  // namespace backend_names

void Backend::notSupported(const OpContext& ctx) const {
  const std::string name = backend_names::of(this);
  const std::string who = name.empty() ? std::string("this backend") : "backend '" + name + "'";
  raise(ErrorCode::NotSupported, ErrorContext::of(ctx), who + " does not implement " + opName(ctx.op),
        std::string("Its plugin's manifest declares ") + opName(ctx.op) + " but the class does not override it: " +
            "remove the op from the plugin's Capabilities so routes send it to another backend " +
            "(`routes: - { op: " + opName(ctx.op) + ", backend: [OTHER] }`), or implement it");
}

WorkPtr Backend::allreduce(const OpContext& ctx, Tensor&, const AllreduceOptions&) { notSupported(ctx); }
WorkPtr Backend::allreduceCoalesced(const OpContext& ctx, std::vector<Tensor>&, const AllreduceCoalescedOptions&) {
  notSupported(ctx);
}
WorkPtr Backend::broadcast(const OpContext& ctx, Tensor&, const BroadcastOptions&) { notSupported(ctx); }
WorkPtr Backend::reduce(const OpContext& ctx, Tensor&, const ReduceOptions&) { notSupported(ctx); }
WorkPtr Backend::allgather(const OpContext& ctx, std::vector<Tensor>&, const Tensor&, const AllgatherOptions&) {
  notSupported(ctx);
}
WorkPtr Backend::allgatherIntoTensor(const OpContext& ctx, Tensor&, const Tensor&, const AllgatherOptions&) {
  notSupported(ctx);
}
WorkPtr Backend::allgatherCoalesced(const OpContext& ctx, std::vector<std::vector<Tensor>>&, const std::vector<Tensor>&,
                                    const AllgatherOptions&) {
  notSupported(ctx);
}
WorkPtr Backend::gather(const OpContext& ctx, std::vector<Tensor>&, const Tensor&, const GatherOptions&) {
  notSupported(ctx);
}
WorkPtr Backend::scatter(const OpContext& ctx, Tensor&, const std::vector<Tensor>&, const ScatterOptions&) {
  notSupported(ctx);
}
WorkPtr Backend::reduceScatter(const OpContext& ctx, Tensor&, const std::vector<Tensor>&, const ReduceScatterOptions&) {
  notSupported(ctx);
}
WorkPtr Backend::reduceScatterTensor(const OpContext& ctx, Tensor&, const Tensor&, const ReduceScatterOptions&) {
  notSupported(ctx);
}
WorkPtr Backend::alltoall(const OpContext& ctx, std::vector<Tensor>&, const std::vector<Tensor>&,
                          const AlltoallOptions&) {
  notSupported(ctx);
}
WorkPtr Backend::alltoallSingle(const OpContext& ctx, Tensor&, const Tensor&, const AlltoallSingleOptions&) {
  notSupported(ctx);
}
WorkPtr Backend::barrier(const OpContext& ctx, const BarrierOptions&) { notSupported(ctx); }
WorkPtr Backend::send(const OpContext& ctx, const Tensor&, int, const SendOptions&) { notSupported(ctx); }
WorkPtr Backend::recv(const OpContext& ctx, Tensor&, int, const RecvOptions&) { notSupported(ctx); }
WorkPtr Backend::recvAnySource(const OpContext& ctx, Tensor&, const RecvOptions&) { notSupported(ctx); }

void Backend::abort(const std::string&) {}
void Backend::shutdown() {}
std::shared_ptr<void> Backend::prepareSplit(const SplitRequest&) { return nullptr; }

}  // namespace commhost
