// SPDX-License-Identifier: Apache-2.0
// ProcessGroup's API over its Impl (impl.h): reads of the group's fields and forwards.
// The ops themselves are in collectives.cc.
#include "commhost/process_group.h"

#include "impl.h"

namespace commhost {

int ProcessGroup::rank() const { return impl_->rank_; }
int ProcessGroup::size() const { return impl_->worldSize_; }
const std::string& ProcessGroup::name() const { return impl_->name_; }
const std::vector<int>& ProcessGroup::globalRanks() const { return impl_->globalRanks_; }
uint64_t ProcessGroup::seq() const { return impl_->seq(); }
uint64_t ProcessGroup::bytesIssued() const { return impl_->bytesIssued_.load(std::memory_order_relaxed); }
const Config& ProcessGroup::config() const { return impl_->config(); }
const RouteTable& ProcessGroup::routes() const { return impl_->routes(); }
const PluginRegistry& ProcessGroup::registry() const { return *impl_->setup_.registry; }
uint64_t ProcessGroup::generation() const { return impl_->generation(); }
const StorePtr& ProcessGroup::store() const { return impl_->store_; }
Backend& ProcessGroup::backend(const std::string& name) const { return impl_->backend(name); }

std::vector<ShadowRecord> ProcessGroup::shadowReport(std::chrono::milliseconds waitInFlight) const {
  return impl_->shadowReport(waitInFlight);
}

void ProcessGroup::monitoredBarrier(const MonitoredBarrierOptions& opts) { impl_->monitoredBarrier(opts); }
std::shared_ptr<ProcessGroup> ProcessGroup::newGroup(const std::vector<int>& ranks) { return impl_->newGroup(ranks); }
std::shared_ptr<ProcessGroup> ProcessGroup::split(int color, int key) { return impl_->split(color, key); }
int ProcessGroup::addCompletionHook(CompletionHook hook) { return impl_->addCompletionHook(std::move(hook)); }
void ProcessGroup::removeCompletionHook(int id) { impl_->removeCompletionHook(id); }

ReconfigureReport ProcessGroup::reconfigure(std::shared_ptr<const Config> newConfig,
                                            const ReconfigureOptions& options) {
  return impl_->reconfigure(std::move(newConfig), options);
}

ShrinkReport ProcessGroup::shrink(const ShrinkOptions& options) { return impl_->shrink(options); }

void ProcessGroup::beginForeignIssue() { impl_->foreignIssue_.fetch_add(1, std::memory_order_acq_rel); }
void ProcessGroup::endForeignIssue() { impl_->foreignIssue_.fetch_sub(1, std::memory_order_acq_rel); }
void ProcessGroup::syncPoint() { impl_->syncPoint(); }
ProcessGroup::SyncStatus ProcessGroup::syncStatus() const {
  return {impl_->syncCount_, impl_->syncDone_, impl_->syncError_};
}

void ProcessGroup::abort(const std::string& reason) { impl_->abort(reason); }
void ProcessGroup::shutdown() { impl_->shutdown(); }

}  // namespace commhost
