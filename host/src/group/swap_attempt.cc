// SPDX-License-Identifier: Apache-2.0
#include "swap_attempt.h"

#include <algorithm>
#include <set>

#include "../supervisor/supervisor.h"
#include "commhost/errors.h"

namespace commhost {
namespace {

using swap::BuildReport;
using swap::CheckVote;
using swap::Decision;

std::chrono::microseconds since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t);
}

std::string rankList(const std::vector<int>& ranks) {
  std::string out;
  for (int r : ranks) out += (out.empty() ? "" : ", ") + std::to_string(r);
  return out;
}

// The plugins a config makes backends and comm hooks from (hooks' wrappers included).
std::vector<std::string> pluginsOf(const Config& config) {
  std::set<std::string> names;
  for (const auto& [name, ref] : config.backends) names.insert(ref.plugin);
  for (const auto& [name, ref] : config.hooks) {
    names.insert(ref.plugin);
    if (!ref.wrap.empty()) names.insert(ref.wrap);
  }
  return {names.begin(), names.end()};
}

// "name=<file hash>,..." of those plugins' builds: what the ranks compare.
std::string buildsOf(const PluginRegistry& registry, const std::vector<std::string>& plugins) {
  std::string out;
  for (const auto& p : plugins) out += (out.empty() ? "" : ",") + p + "=" + registry.fileHash(p);
  return out.empty() ? "-" : out;
}

}  // namespace

std::function<void()> ProcessGroup::Impl::stopIfBroken(const std::string& during) const {
  return [aborted = aborted_, monitor = monitor_, during] {
    if (aborted->load(std::memory_order_acquire)) throw AbortedError("the group was aborted" + during);
    if (monitor && monitor->anyPeerLost.load(std::memory_order_acquire)) throw PeerLostError(monitor->lostText());
  };
}

SwapAttempt::SwapAttempt(ProcessGroup::Impl& group, std::shared_ptr<const Config> config,
                         const ReconfigureOptions& options, std::string loadError)
    : g_(group),
      config_(std::move(config)),
      options_(options),
      loadError_(std::move(loadError)),
      attempt_(++group.swapAttempts_),
      from_(group.state_->generation),
      where_{group.name_, group.rank_, "reconfigure"},
      registry_(group.setup_.registry) {
  timeout_ = options_.timeout.count() > 0 ? options_.timeout : g_.state_->config->timeout();
  round_ = "swap/" + std::to_string(attempt_) + "/";
  generations_ = " (generation " + std::to_string(from_) + " -> " + std::to_string(from_ + 1) + ", attempt " +
                 std::to_string(attempt_) + ")";
  record_.group = g_.name_;
  record_.rank = g_.rank_;
  record_.fromGeneration = record_.toGeneration = from_;
  record_.startedUs = supervisor::wallMicros();
  const std::function<void()> stopIfBroken = g_.stopIfBroken(" during the swap");
  protocolStore_ = std::make_shared<SwapStore>(g_.store_, stopIfBroken);
  // The backends' rendezvous also stops once a rank reported failure.
  buildStore_ = std::make_shared<SwapStore>(
      g_.store_,
      [stopIfBroken, abandoned = abandoned_, store = g_.store_, failedKey = round_ + "failed"] {
        stopIfBroken();
        if (store->check({failedKey})) {
          abandoned->store(true);
          throw AbortedError("stopped building: " + toString(store->get(failedKey)));
        }
      },
      SwapStore::Record::UntilStopped);
}

ReconfigureReport SwapAttempt::run() {
  if (g_.aborted_->load(std::memory_order_acquire))
    raise(ErrorCode::Aborted, where_, "the group was aborted", "create a new group to continue");
  if (g_.supervisor_)
    g_.supervisor_->events().add("swap_started", g_.name_,
                                 where_.format() + "swap from generation " + std::to_string(record_.fromGeneration) +
                                     " started (config " +
                                     (config_ ? config_->source : std::string("that did not load")) + ")");
  check();
  drain();
  build();
  decide();
  commit();
  return report_;
}

void SwapAttempt::finish(const std::string& outcome, const std::string& error) {
  for (auto& key : buildStore_->stopRecording()) g_.swapLeftovers_.push_back(std::move(key));
  report_.total = since(t0_);
  record_.outcome = outcome;
  record_.error = error;
  record_.checkUs = report_.check.count();
  record_.drainUs = report_.drain.count();
  record_.buildUs = report_.build.count();
  record_.commitUs = report_.commit.count();
  record_.totalUs = report_.total.count();
  record_.kept = report_.kept;
  record_.built = report_.built;
  record_.removed = report_.removed;
  if (g_.supervisor_) g_.supervisor_->recordSwap(record_);
}

void SwapAttempt::fail(ErrorCode code, const std::string& what, const std::string& hint) {
  finish("rolled_back", where_.format() + what + generations_);
  if (g_.logger_) g_.logger_->warn("reconfigure: " + what + generations_);
  // A backend reports the rendezvous that a lost peer ended as its own failure to start:
  // the cause is the lost peer, which the caller's recovery (shrink) goes around, not the
  // backend's options (as for a membership round's build).
  if (code == ErrorCode::Plugin && g_.monitor_ && g_.monitor_->anyPeerLost.load(std::memory_order_acquire))
    raise(
        ErrorCode::PeerLost, where_,
        what + generations_ + "; every rank keeps generation " + std::to_string(from_) + "; " + g_.monitor_->lostText(),
        "the job lost a rank during the swap: with supervisor.on_peer_loss: shrink, call shrink() and go on "
        "(commhost train does); otherwise restart the job");
  raise(code, where_, what + generations_ + "; every rank keeps generation " + std::to_string(from_), hint);
}

std::vector<std::string> SwapAttempt::keysOf(const std::string& kind) const {
  std::vector<std::string> keys(g_.worldSize_);
  for (int r = 0; r < g_.worldSize_; ++r) keys[r] = round_ + kind + std::to_string(r);
  return keys;
}

bool SwapAttempt::tryGather(const std::string& kind, const char* phase, std::vector<Bytes>& values, Missed& missed) {
  const auto names = keysOf(kind);
  try {
    protocolStore_->wait(names, timeout_);
    values = g_.store_->multiGet(names);
    return true;
  } catch (const TimeoutError&) {
    std::vector<int> missing;
    for (int r = 0; r < g_.worldSize_; ++r)
      if (!g_.store_->check({names[r]})) missing.push_back(g_.globalRanks_[r]);
    if (missing.empty()) {
      // Every rank arrived just after the wait gave up (a peer whose build is bounded by
      // the same timeout): that is not a missed phase.
      values = g_.store_->multiGet(names);
      return true;
    }
    missed = {
        ErrorCode::Timeout,
        "rank(s) " + rankList(missing) + " did not reach the " + phase + " phase within " + formatDuration(timeout_),
        "every rank of the group must call reconfigure() at the same point of its ops; check those ranks' logs"};
    return false;
  } catch (const Error& e) {
    missed = {e.code(), std::string("stopped waiting in the ") + phase + " phase: " + e.what(),
              e.code() == ErrorCode::PeerLost ? "the job lost a rank; restart it" : "create a new group to continue"};
    return false;
  }
}

std::vector<Bytes> SwapAttempt::gather(const std::string& kind, const char* phase) {
  std::vector<Bytes> values;
  Missed missed;
  if (!tryGather(kind, phase, values, missed)) fail(missed.code, missed.what, missed.hint);
  return values;
}

// ---- 1. check -------------------------------------------------------------------------

void SwapAttempt::check() {
  g_.store_->set(round_ + "check/" + std::to_string(g_.rank_), swap::encode(vote()));
  const auto raw = gather("check/", "check");
  forgetPreviousAttempt();
  std::vector<CheckVote> votes;
  const auto keys = keysOf("check/");
  for (int r = 0; r < g_.worldSize_; ++r) votes.push_back(swap::decodeCheckVote(raw[r], keys[r]));
  refuseUnlessAllOk(votes);
  refuseUnlessAllSame(votes);
  report_.check = since(t0_);
}

// Into a copy: the registry this group holds may be shared (with the application, with
// other groups, with other ranks' threads) and is read without a lock.
void SwapAttempt::reloadChangedPlugins() {
  std::shared_ptr<PluginRegistry> copy;
  for (const auto& p : pluginsOf(*config_)) {
    if (!registry_->changedOnDisk(p)) continue;
    if (!copy) copy = std::make_shared<PluginRegistry>(*registry_);
    if (copy->reload(p)) reloaded_.push_back(p);
  }
  if (copy) registry_ = copy;
}

// A job opens only the plugins its first config names (PluginRegistry::scanFor): one the
// new config adds is opened now from the folders the group listed, into a copy as above.
void SwapAttempt::openNewPlugins() {
  const std::vector<std::string> names = pluginsOf(*config_);
  if (std::all_of(names.begin(), names.end(), [&](const std::string& n) { return registry_->find(n); })) return;
  auto copy = std::make_shared<PluginRegistry>(*registry_);
  copy->openFor(names);
  registry_ = copy;
}

CheckVote SwapAttempt::vote() {
  CheckVote vote;
  vote.verdict = CheckVote::Verdict::BadConfig;
  try {
    if (!loadError_.empty()) throw ConfigError(loadError_);
    if (g_.foreignIssue_.load(std::memory_order_acquire) > 0)
      raise(ErrorCode::Config, where_,
            "reconfigure() was called during a Reducer iteration (between prepareForBackward and finalize), while "
            "other threads may issue on the group",
            "call reconfigure() (or syncPoint()) between iterations, after finalize()");
    if (config_->groupName() != g_.state_->config->groupName())
      raise(ErrorCode::Config, where_,
            "the new config names the group '" + config_->groupName() + "' but this group is '" +
                g_.state_->config->groupName() + "'",
            "keep group.name");
    vote.builds = "-";
    openNewPlugins();
    if (options_.reloadPlugins) {
      vote.verdict = CheckVote::Verdict::BadPlugin;
      reloadChangedPlugins();
      vote.verdict = CheckVote::Verdict::BadConfig;
      vote.builds = buildsOf(*registry_, pluginsOf(*config_));
    }
    // The group's registry listed its folders when the group was created: a plugin found
    // only on the new config's plugin_path is not in it.
    for (const auto& [backendName, ref] : config_->backends)
      if (!registry_->find(ref.plugin))
        raise(ErrorCode::Config, where_,
              "backend '" + backendName + "' names plugin '" + ref.plugin +
                  "', which this group's plugin registry does not hold",
              "put its folder on the plugin_path of the config the job started with (or COMMHOST_PLUGIN_PATH)");
    checkSameAvailability(*g_.store_, round_ + "unavailable", *config_, *registry_, where_);
    // The table the ranks vote on is the one build() uses: a tuner is asked once.
    votedRoutes_ = RouteTable::forGroup(*config_, *registry_, g_.tableSite());
    vote.routes = votedRoutes_->fingerprint();
    if (options_.onlyIfShadowAgrees) {
      vote.verdict = CheckVote::Verdict::BadShadow;
      g_.requireShadowAgreement(*votedRoutes_, where_);
    }
  } catch (const std::exception& e) {
    vote.why = e.what();
    return vote;
  }
  vote.verdict = CheckVote::Verdict::Ok;
  vote.hash = config_->hash;
  vote.source = config_->source;
  return vote;
}

// Every rank has entered this attempt, so every rank is done with the previous ones:
// their protocol keys and what their backends wrote while being built go.
void SwapAttempt::forgetPreviousAttempt() {
  for (const auto& key : g_.swapLeftovers_) g_.store_->deleteKey(key);
  g_.swapLeftovers_.clear();
  if (attempt_ <= 1) return;
  const std::string previous = "swap/" + std::to_string(attempt_ - 1) + "/";
  for (const char* kind : {"check/", "report/"}) g_.store_->deleteKey(previous + kind + std::to_string(g_.rank_));
  if (g_.rank_ == 0)
    for (const char* key : {"failed", "outcome", "unavailable"}) g_.store_->deleteKey(previous + key);
}

// Ranks that refused for the same reason are listed once (one file shared by all).
void SwapAttempt::refuseUnlessAllOk(const std::vector<CheckVote>& votes) {
  std::vector<int> bad;
  std::vector<std::pair<std::string, std::vector<int>>> reasons;
  bool pluginOnly = true, shadowOnly = true;
  for (int r = 0; r < g_.worldSize_; ++r) {
    const CheckVote& v = votes[r];
    if (v.verdict == CheckVote::Verdict::Ok) continue;
    bad.push_back(g_.globalRanks_[r]);
    pluginOnly = pluginOnly && v.verdict == CheckVote::Verdict::BadPlugin;
    shadowOnly = shadowOnly && v.verdict == CheckVote::Verdict::BadShadow;
    auto it = std::find_if(reasons.begin(), reasons.end(), [&](const auto& x) { return x.first == v.why; });
    if (it == reasons.end()) it = reasons.insert(reasons.end(), {v.why, {}});
    it->second.push_back(g_.globalRanks_[r]);
  }
  if (bad.empty()) return;
  std::string why;
  for (const auto& [text, ranks] : reasons)
    why += reasons.size() == 1 ? text
                               : (why.empty() ? "" : "; ") + std::string("rank(s) ") + rankList(ranks) + ": " + text;
  if (shadowOnly)
    fail(ErrorCode::Config, "onlyIfShadowAgrees refused the swap on rank(s) " + rankList(bad) + ": " + why,
         "shadow the new backend first (a route's `shadow: NAME`, `sample: RATE`) and check ProcessGroup::"
         "shadowReport() or `commhost trace analyze`; or swap without onlyIfShadowAgrees");
  if (pluginOnly)
    fail(ErrorCode::Plugin, "a changed plugin file could not be reloaded on rank(s) " + rankList(bad) + ": " + why,
         "fix or rebuild the plugin file named (`commhost plugins inspect FILE` shows why it is refused) and call "
         "reconfigure() again");
  fail(ErrorCode::Config, "the new config is invalid on rank(s) " + rankList(bad) + ": " + why,
       "fix the config (`commhost config check FILE`) and call reconfigure() again");
}

void SwapAttempt::refuseUnlessAllSame(const std::vector<CheckVote>& votes) {
  const CheckVote& first = votes[0];
  std::string differ, differBuilds, differRoutes;
  for (int r = 1; r < g_.worldSize_; ++r) {
    const CheckVote& v = votes[r];
    const std::string rank = "rank " + std::to_string(g_.globalRanks_[r]);
    if (v.hash == first.hash && v.builds != first.builds)
      differBuilds += (differBuilds.empty() ? "" : "; ") + rank + " has " + v.builds;
    if (v.hash == first.hash && v.routes != first.routes)
      differRoutes += (differRoutes.empty() ? "" : "; ") + rank + " built " + std::to_string(v.routes);
    if (v.hash != first.hash)
      differ += (differ.empty() ? "" : "; ") + rank + " loaded " + v.source + " with hash " + std::to_string(v.hash);
  }
  const std::string rank0 = "rank " + std::to_string(g_.globalRanks_[0]);
  if (!differ.empty())
    fail(ErrorCode::Config,
         "the ranks passed different configs: " + rank0 + " loaded " + first.source + " with hash " +
             std::to_string(first.hash) + " but " + differ,
         "every rank must pass the same config and overrides; compare `commhost config check` output on each");
  if (!differBuilds.empty())
    fail(ErrorCode::Plugin,
         "the ranks would run different plugin builds (name=file hash): " + rank0 + " has " + first.builds + " but " +
             differBuilds,
         "install the same plugin files on every rank (`commhost plugins inspect NAME` shows the file) and call "
         "reconfigure() again");
  // The same config and plugin builds, yet other tables: a tuner's answers, or (without
  // one) plugins whose manifests differ between hosts when the builds were not compared.
  if (!differRoutes.empty() && config_->tuner)
    fail(ErrorCode::Config,
         "tuner '" + config_->tuner->plugin + "' answered the ranks differently (route table fingerprints): " + rank0 +
             " built " + std::to_string(first.routes) + " but " + differRoutes,
         "a tuner must answer from what every rank shares (the same options and files on every host); fix it, or "
         "remove `tuner:` and call reconfigure() again");
  if (!differRoutes.empty())
    fail(ErrorCode::Plugin,
         "the ranks resolved the same config to different route tables (fingerprints): " + rank0 + " built " +
             std::to_string(first.routes) + " but " + differRoutes + "; their plugins' manifests differ",
         "install the same plugin files on every rank (`commhost plugins inspect NAME` shows the file and its "
         "manifest), or call reconfigure() with reloadPlugins to compare the builds");
}

// ---- 2. drain, 3. build ---------------------------------------------------------------

void SwapAttempt::drain() {
  const auto t = Steady::now();
  if (g_.supervisor_) {
    const std::string pending = g_.supervisor_->waitGroupIdle(g_.monitor_.get(),
                                                              g_.supervisor_->clock().now() + timeout_);
    if (!pending.empty())
      failure_ = {BuildReport::Kind::Failed, ErrorCode::Timeout,
                  pending + " was still in flight after " + formatDuration(timeout_)};
  }
  report_.drain = since(t);
}

void SwapAttempt::build() {
  const auto t = Steady::now();
  if (failure_.kind == BuildReport::Kind::Ok) {
    try {
      next_ = g_.buildState(config_, *registry_, g_.state_.get(), reloaded_, round_, buildStore_, from_ + 1,
                            &report_.kept, &report_.built, nullptr, votedRoutes_ ? &*votedRoutes_ : nullptr);
    } catch (const std::exception& e) {
      const auto* error = dynamic_cast<const Error*>(&e);
      failure_ = abandoned_->load()
                     ? BuildReport{BuildReport::Kind::Abandoned, ErrorCode::Aborted, e.what()}
                     : BuildReport{BuildReport::Kind::Failed, error ? error->code() : ErrorCode::Plugin, e.what()};
    }
  }
  if (failure_.kind == BuildReport::Kind::Failed) reportFailure(failure_);
  report_.build = since(t);
}

void SwapAttempt::reportFailure(const BuildReport& failure) {
  g_.store_->compareSet(round_ + "failed", {}, toBytes("rank " + rankText() + " failed: " + failure.why));
}

// ---- 4. decide ------------------------------------------------------------------------

// One decision for all: the first rank to write `outcome` decides it. Without it a rank
// whose wait for the reports timed out would roll back while a slower one, seeing every
// report ok a moment later, committed.
void SwapAttempt::decide() {
  const auto t = Steady::now();
  try {
    g_.store_->set(round_ + "report/" + std::to_string(g_.rank_), swap::encode(failure_));
  } catch (const std::exception& e) {
    abortUndecided(e.what());  // the report may have reached the store before it failed
  }
  std::vector<Bytes> raw;
  Missed missed;
  const bool gathered = tryGather("report/", "report", raw, missed);
  std::vector<BuildReport> reports;
  const auto keys = keysOf("report/");
  for (size_t r = 0; r < raw.size(); ++r) reports.push_back(swap::decodeBuildReport(raw[r], keys[r]));
  const bool allOk = gathered && std::all_of(reports.begin(), reports.end(),
                                             [](const BuildReport& b) { return b.kind == BuildReport::Kind::Ok; });
  const Decision mine{allOk, g_.globalRanks_[g_.rank_], gathered ? "a rank failed" : missed.what};
  Decision decision;
  try {
    decision = swap::decodeDecision(g_.store_->compareSet(round_ + "outcome", {}, swap::encode(mine)),
                                    round_ + "outcome");
  } catch (const std::exception& e) {
    abortUndecided(e.what());
  }
  if (!decision.commit) rollBack(reports, gathered, missed, decision);
  report_.commit = since(t);  // the commit phase adds its own time
}

// The backends built for this attempt go (kept ones stay with the group's State), and the
// report no longer lists them.
void SwapAttempt::dropBuilt() {
  next_.reset();
  g_.abortTargets_->clearBuilding();
  report_.kept.clear();
  report_.built.clear();
}

void SwapAttempt::rollBack(const std::vector<BuildReport>& reports, bool gathered, const Missed& missed,
                           const Decision& decision) {
  if (!gathered)  // ranks still building stop at once instead of at the timeout
    try {
      g_.store_->compareSet(round_ + "failed", {}, toBytes("rank " + rankText() + ": " + missed.what));
    } catch (const std::exception&) {
    }
  dropBuilt();
  if (!gathered && failure_.kind == BuildReport::Kind::Failed)  // this rank's own failure first
    fail(failure_.code,
         "the new backends failed on rank(s) " + rankText() + ": rank " + rankText() + ": " + failure_.why + "; and " +
             missed.what,
         "the group goes on with its current backends; fix this rank's backend and call reconfigure() again");
  if (!gathered) fail(missed.code, missed.what, missed.hint);
  std::vector<int> failed, abandonedBy;
  std::string why, abandonWhy;
  ErrorCode code = ErrorCode::Plugin;
  for (size_t r = 0; r < reports.size(); ++r) {
    const BuildReport& b = reports[r];
    if (b.kind == BuildReport::Kind::Failed) {
      if (failed.empty()) code = b.code;
      failed.push_back(g_.globalRanks_[r]);
      why += (why.empty() ? "" : "; ") + std::string("rank ") + std::to_string(g_.globalRanks_[r]) + ": " + b.why;
    } else if (b.kind == BuildReport::Kind::Abandoned) {
      abandonedBy.push_back(g_.globalRanks_[r]);
      if (abandonWhy.empty()) abandonWhy = b.why;
    }
  }
  if (!failed.empty() || !abandonedBy.empty())
    fail(code,
         failed.empty() ? "rank(s) " + rankList(abandonedBy) + " stopped building: " + abandonWhy
                        : "the new backends failed on rank(s) " + rankList(failed) + ": " + why,
         "the group goes on with its current backends; fix the failing rank's backend and call reconfigure() again");
  fail(ErrorCode::Timeout,
       "every rank reported success here, but another rank had already decided to roll back (rank " +
           std::to_string(decision.rank) + ": " + decision.why + ")",
       "the group goes on with its current backends; call reconfigure() again, with a longer "
       "ReconfigureOptions::timeout if a rank is slow to build");
}

// The decision was written (or not) by a store this rank can no longer reach: the others
// may have committed. Rolling back here would split the job across two generations, so
// this rank's group ends, and says why; the ranks that committed find the loss on their
// next op (their store or peer is gone too).
void SwapAttempt::abortUndecided(const std::string& storeError) {
  dropBuilt();
  const std::string what = "could not read the swap's decision from the store (" + storeError +
                           "), so other ranks may have committed generation " + std::to_string(from_ + 1) +
                           " while this one cannot know" + generations_;
  finish("undecided", where_.format() + what);
  if (g_.logger_) g_.logger_->error("reconfigure: " + what + "; aborting the group on this rank");
  g_.abortTargets_->abortAll("reconfigure " + what);
  raise(ErrorCode::Store, where_,
        what +
            "; the group is aborted on this rank so that no rank runs on a generation "
            "its peers left",
        "the store (or the rank serving it) went away during the swap: restart the job from its last checkpoint");
}

// ---- 5. commit ------------------------------------------------------------------------

// One pointer store switches every later call to the new generation.
void SwapAttempt::commit() {
  const auto t = Steady::now();
  std::shared_ptr<const ProcessGroup::State> old = std::move(g_.state_);
  g_.state_ = std::move(next_);
  g_.setup_.config = config_;
  g_.setup_.registry = registry_;  // the old snapshot stays alive while its groups or owners hold it
  report_.reloaded = reloaded_;
  g_.checkCollectives_ = config_->host.getBool("debug.check_collectives");  // read by this thread's calls
  g_.abortTargets_->set(g_.state_->backends);
  for (size_t i = 0; i < old->backends.size(); ++i) {
    const auto& b = old->backends[i];
    const auto& now = g_.state_->backends;
    if (!b || std::find(now.begin(), now.end(), b) != now.end()) continue;
    const std::string& name = old->routes.backendNames()[i];
    report_.removed.push_back(name);
    try {
      b->shutdown();  // drained above: returns once its threads are done
    } catch (const std::exception& e) {
      if (g_.logger_) g_.logger_->warn("backend '" + name + "' failed to shut down: " + e.what());
    }
  }
  old.reset();  // the replaced backends are destroyed here (the supervisor holds weak refs only)
  report_.commit += since(t);
  report_.generation = g_.state_->generation;
  record_.toGeneration = report_.generation;
  g_.publishStatusInfo();
  g_.publishKeyManifest();  // what the new backends wrote, too
  finish("committed", "");
  if (!g_.logger_) return;
  for (const auto& p : reloaded_)
    g_.logger_->info("reloaded plugin " + p + " from " + registry_->find(p)->path + " (build " +
                     registry_->fileHash(p) + ", reload " + std::to_string(registry_->find(p)->reloads) + ")");
  g_.logger_->info("reconfigured to generation " + std::to_string(report_.generation) + " from " + config_->source +
                   " in " + std::to_string(report_.total.count() / 1000) + " ms");
}

}  // namespace commhost
