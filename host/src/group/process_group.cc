// SPDX-License-Identifier: Apache-2.0
#include "commhost/process_group.h"

#include "impl.h"
#include "live_routes.h"
#include "shadow.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "../store/counting_store.h"
#include "../supervisor/supervisor.h"
#include "backend_factory.h"
#include "commhost/errors.h"
#include "commhost/sdk/launch_report.h"
#include "group_state.h"
#include "sync_point.h"

namespace commhost {

ProcessGroup::ProcessGroup(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

ProcessGroup::Impl::Impl(Setup setup, std::string name, std::vector<int> globalRanks)
    : setup_(std::move(setup)),
      name_(std::move(name)),
      rank_(setup_.rank),
      worldSize_(setup_.worldSize),
      globalRanks_(std::move(globalRanks)),
      abortTargets_(std::make_shared<AbortTargets>()),
      shadows_(std::make_shared<ShadowStats>()),
      // Room for the longest window a size class can ask for (16x after four switches).
      live_(std::make_shared<LiveStats>(16 * static_cast<size_t>(setup_.config->host.getInt("tune.live_window")))) {
  abortTargets_->aborted = aborted_;
  callContext_.group = name_;
}

const Config& ProcessGroup::Impl::config() const { return *state_->config; }
const RouteTable& ProcessGroup::Impl::routes() const { return state_->routes; }
uint64_t ProcessGroup::Impl::generation() const { return state_->generation; }
std::vector<ShadowRecord> ProcessGroup::Impl::shadowReport(std::chrono::milliseconds waitInFlight) const {
  return shadows_->report(waitInFlight);
}

std::shared_ptr<ProcessGroup> ProcessGroup::Impl::createWorld(Setup setup) {
  if (!setup.config || !setup.registry || !setup.store)
    throw InvalidArgument("ProcessGroup::create needs a config, a plugin registry and a store");
  if (setup.worldSize < 1 || setup.rank < 0 || setup.rank >= setup.worldSize)
    throw InvalidArgument("rank " + std::to_string(setup.rank) + " is outside world size " +
                          std::to_string(setup.worldSize));
  std::vector<int> ranks(setup.worldSize);
  for (int i = 0; i < setup.worldSize; ++i) ranks[i] = i;
  setup.store = std::make_shared<CountingStore>(std::move(setup.store));  // for the status record
  const std::string name = setup.config->groupName();
  // Each creation of a group name works under a fresh prefix: every rank counts its own
  // creations in the store, so a group re-created after an abort never reads the keys
  // (peer addresses, barrier flags) of the group it replaces.
  const int64_t generation = setup.store->add(name + "/generation/" + std::to_string(setup.rank), 1);
  auto pg = open(std::move(setup), name, std::move(ranks), name + "/" + std::to_string(generation));
  Impl& g = *pg->impl_;
  if (g.setup_.config->host.getBool("group.join")) {
    g.joinRunningJob();  // a restarted rank: the running members admit it
    return pg;
  }
  g.checkSameConfig();
  g.createBackends();
  g.startSupervision();
  g.startSyncPoller();
  return pg;
}

std::shared_ptr<ProcessGroup> ProcessGroup::Impl::open(Setup setup, std::string name, std::vector<int> globalRanks,
                                                       std::string storePath) {
  std::shared_ptr<ProcessGroup> pg(
      new ProcessGroup(std::make_unique<Impl>(std::move(setup), std::move(name), std::move(globalRanks))));
  Impl& g = *pg->impl_;
  g.storePath_ = std::move(storePath);
  g.basePath_ = g.storePath_;
  g.ledger_ = std::make_shared<KeyLedger>(std::make_shared<PrefixStore>(g.storePath_, g.setup_.store));
  g.store_ = g.ledger_;
  return pg;
}

std::shared_ptr<ProcessGroup> ProcessGroup::create(Setup setup) {
  // `commhost run` learns from these whether each rank joined, and why one did not.
  const std::string group = setup.config ? setup.config->groupName() : std::string();
  try {
    auto pg = Impl::createWorld(std::move(setup));
    if (const auto& report = launchReporter()) report({LaunchEvent::Joined, -1, group, 0, "", "", ""});
    return pg;
  } catch (const std::exception& e) {
    reportLaunchFailure(e, group);
    throw;
  }
}

ProcessGroup::~ProcessGroup() = default;

ProcessGroup::Impl::~Impl() {
  try {
    shutdown();
  } catch (const std::exception& e) {
    if (logger_) logger_->error(std::string("shutdown failed: ") + e.what());
  }
  if (supervisor_) supervisor::Supervisor::release(std::move(supervisor_), monitor_.get());
}

void ProcessGroup::Impl::startSupervision() {
  const auto settings = supervisor::Settings::fromConfig(*setup_.config);
  checkCollectives_ = settings.checkCollectives;
  monitor_ = std::make_shared<supervisor::GroupMonitor>();
  monitor_->name = name_;
  monitor_->rank = rank_;
  monitor_->worldSize = worldSize_;
  monitor_->globalRanks = globalRanks_;
  monitor_->store = store_;
  monitor_->jobStore = setup_.jobStore ? setup_.jobStore : setup_.store;
  // createWorld() wrapped the job's store to count its calls; subgroups share it.
  if (const auto* counting = dynamic_cast<const CountingStore*>(setup_.store.get()))
    monitor_->storeCounts = counting->counts();
  monitor_->onError = settings.onError;
  monitor_->shrinkOnPeerLoss = settings.shrinkOnPeerLoss;
  if (!settings.enabled) return;
  // The monitor outlives the group in works still held by the application, so it
  // aborts through a weak reference to the backends, never through the group.
  // AbortTargets follows reconfigure(): the backends of the committed generation and
  // those a swap is building.
  auto targets = abortTargets_;
  monitor_->abortGroup = [targets](const std::string& reason) { targets->abortAll(reason); };
  supervisor_ = supervisor::Supervisor::acquire(settings);
  publishStatusInfo();
  supervisor_->attach(monitor_);
}

void ProcessGroup::Impl::publishStatusInfo() {
  if (!monitor_ || !state_) return;
  supervisor::GroupMonitor::Info info;
  info.generation = state_->generation;
  info.configHash = std::to_string(state_->config->hash);
  info.configSource = state_->config->source;
  const auto& names = state_->routes.backendNames();
  for (size_t i = 0; i < names.size(); ++i) {
    if (!state_->routes.uses(static_cast<int>(i))) continue;
    const bool down = i < state_->unavailable.size() && !state_->unavailable[i].empty();
    info.backends.push_back(down ? names[i] + " (unavailable: " + state_->unavailable[i] + ")" : names[i]);
  }
  // describe() is written for people (`config check`): status shows its lines as they are.
  std::string table = state_->routes.describe();
  for (size_t at = 0; at < table.size();) {
    const size_t end = std::min(table.find('\n', at), table.size());
    if (end > at) info.routes.push_back(table.substr(at, end - at));
    at = end + 1;
  }
  monitor_->setInfo(std::move(info));
}

int ProcessGroup::Impl::addCompletionHook(CompletionHook hook) {
  if (!supervisor_)
    raise(ErrorCode::InvalidArgument, {name_, rank_}, "completion hooks need the supervisor, which is off",
          "set supervisor.enabled: true");
  return supervisor_->addHook(monitor_.get(), std::move(hook));
}

void ProcessGroup::Impl::removeCompletionHook(int id) {
  if (supervisor_) supervisor_->removeHook(id);
}

// The first rank to arrive publishes its hash; each later rank compares with it.
void ProcessGroup::Impl::checkSameConfig() {
  const std::string mine = std::to_string(setup_.config->hash) + " rank " + std::to_string(rank_);
  const std::string stored = toString(store_->compareSet("config_hash", {}, toBytes(mine)));
  const std::string theirHash = stored.substr(0, stored.find(' '));
  if (theirHash != std::to_string(setup_.config->hash))
    raise(ErrorCode::Config, {name_, rank_},
          "this rank loaded config " + setup_.config->source + " with hash " + std::to_string(setup_.config->hash) +
              " but " + stored.substr(stored.find(' ') + 1) + " loaded one with hash " + theirHash,
          "every rank must use the same config and overrides; compare `commhost config check` output on each");
  checkSameAvailability(*store_, "config_unavailable", *setup_.config, *setup_.registry, {name_, rank_});
}

TableSite ProcessGroup::Impl::tableSite() const {
  const int local = setup_.localWorldSize > 0 ? std::min(setup_.localWorldSize, worldSize_) : worldSize_;
  return {name_, rank_, worldSize_, local};
}

void ProcessGroup::Impl::createBackends(const SplitHandles& splitFrom) {
  logger_ = std::make_shared<Logger>("commhost", "group " + name_ + " rank " + std::to_string(rank_));
  // Before any backend is built: a table the ranks disagree on must not start rendezvous.
  std::optional<RouteTable> routes;
  if (setup_.config->tuner) routes = agreedRoutes(*store_);
  state_ = buildState(setup_.config, *setup_.registry, nullptr, {}, "", nullptr, 0, nullptr, nullptr, &splitFrom,
                      routes ? &*routes : nullptr);
  abortTargets_->set(state_->backends);
  publishKeyManifest();
}

// A cleanup aid: a store that fails here has failed or will fail what matters on its own,
// so a committed swap or a built group is not undone for it.
void ProcessGroup::Impl::publishKeyManifest() {
  if (!ledger_ || rank_ < 0 || rank_ >= static_cast<int>(globalRanks_.size())) return;
  try {
    ledger_->publishManifest(globalRanks_[rank_]);
  } catch (const std::exception& e) {
    if (logger_)
      logger_->warn(std::string("could not list this rank's store keys for the members (should this rank go, its "
                                "keys of this generation stay in the store): ") +
                    e.what());
  }
}

namespace {
// A backend is kept across a swap when everything it was created from is the same.
bool sameEntry(const PluginRef& a, const Config& ca, const PluginRef& b, const Config& cb) {
  return a.plugin == b.plugin && a.options.all() == b.options.all() && ca.timeout() == cb.timeout();
}
}  // namespace

std::shared_ptr<const ProcessGroup::State> ProcessGroup::Impl::buildState(
    std::shared_ptr<const Config> config, const PluginRegistry& registry, const State* keep,
    const std::vector<std::string>& reloaded, const std::string& prefix, const StorePtr& store, uint64_t generation,
    std::vector<std::string>* kept, std::vector<std::string>* built, const SplitHandles* splitFrom,
    const RouteTable* routes) {
  auto st = std::make_shared<State>();
  st->config = std::move(config);
  st->timeout = st->config->timeout();
  st->generation = generation;
  const Config& cfg = *st->config;
  st->routes = routes ? *routes : RouteTable::forGroup(cfg, registry, tableSite());
  st->tableBase = generation;
  st->liveEvery = st->routes.hasLive() ? static_cast<uint64_t>(cfg.host.getInt("tune.live_every")) : 0;
  for (const auto& [backendName, ref] : cfg.backends) {
    const PluginEntry* e = registry.find(ref.plugin);
    // A backend whose every op a route list sends elsewhere is never called: not created,
    // so it neither holds resources nor refuses a job it would not serve.
    if (!st->routes.uses(static_cast<int>(st->backends.size()))) {
      st->backends.push_back(nullptr);
      st->composite.push_back(false);
      st->unavailable.push_back("no route sends it any op");
      continue;
    }
    if (keep) {
      const auto& oldNames = keep->routes.backendNames();
      const auto it = std::find(oldNames.begin(), oldNames.end(), backendName);
      const size_t i = static_cast<size_t>(it - oldNames.begin());
      // A reloaded plugin's backend runs the old build's code: rebuilt, never kept.
      const bool wasReloaded = std::find(reloaded.begin(), reloaded.end(), ref.plugin) != reloaded.end();
      // A composite backend (one made of other backends) is rebuilt too: its parts'
      // entries may have changed while its own did not.
      if (it != oldNames.end() && keep->backends[i] && !wasReloaded && !keep->composite[i] &&
          sameEntry(keep->config->backends.at(backendName), *keep->config, ref, cfg)) {
        st->backends.push_back(keep->backends[i]);
        st->composite.push_back(false);
        st->unavailable.emplace_back();
        if (kept) kept->push_back(backendName);
        continue;
      }
    }
    if (!e || !e->usable()) {
      st->backends.push_back(nullptr);
      st->composite.push_back(false);
      st->unavailable.push_back(e ? e->unavailable : "plugin '" + ref.plugin + "' not found");
      continue;
    }
    // A swap's backends rendezvous under the attempt's own prefix, so their keys never
    // meet those of the generation they replace (or of an attempt that failed).
    BackendSite site{name_, rank_, worldSize_,
                     std::make_shared<PrefixStore>(prefix + "backend/" + backendName, store ? store : store_)};
    if (splitFrom) {
      const auto prepared = splitFrom->find(backendName);
      if (prepared != splitFrom->end()) site.splitFrom = prepared->second;
    }
    bool composite = false;
    st->backends.push_back(createConfiguredBackend(cfg, registry, backendName, site, &composite));
    st->composite.push_back(composite);
    st->unavailable.emplace_back();
    if (store) abortTargets_->addBuilding(st->backends.back());
    if (built) built->push_back(backendName);
  }
  st->recordNames.resize(st->backends.size());
  return st;
}

Backend& ProcessGroup::Impl::backend(const std::string& name) const {
  const auto& names = state_->routes.backendNames();
  for (size_t i = 0; i < names.size(); ++i)
    if (names[i] == name && state_->backends[i]) return *state_->backends[i];
  throw InvalidArgument("group " + name_ + " has no usable backend named '" + name + "'");
}

// Any thread: through AbortTargets, which also reaches the backends a swap is building.
void ProcessGroup::Impl::abort(const std::string& reason) { abortTargets_->abortAll(reason); }

void ProcessGroup::Impl::shutdown() {
  stopSyncPoller();
  if (!state_) return;  // creation failed before the backends existed
  for (auto& b : state_->backends)
    if (b) b->shutdown();
}

}  // namespace commhost
