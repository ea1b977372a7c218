// SPDX-License-Identifier: Apache-2.0
// ProcessGroup::reconfigure: hot swap of a group's backends and routes, with rollback.
//
// A collective over the group's store, independent of every backend (old or new), run on
// the group's calling thread. Attempt A (counted alike on every rank) uses keys under
// "swap/<A>/" of the group store:
//   1. check:  each rank validates the config (with reloadPlugins: first loads again, into a
//              copy of its registry, the config's plugins whose files changed) and
//              publishes "ok <hash> <builds> <source>" (or "bad <why>", "badplugin <why>"
//              when a reload failed) as check/<rank>;
//              all read all, and refuse alike unless every rank's config hash and plugin
//              builds (file hashes, "-" without reloadPlugins) are the same, naming the
//              ranks that differ.
//   2. drain:  each rank waits for its works in flight on this group (the supervisor's list).
//   3. build:  each rank creates the backends whose entry changed, rendezvousing under
//              "swap/<A>/backend/<name>"; unchanged ones are kept (the same objects).
//   4. report: each rank publishes report/<rank>: "ok", "fail <code> <why>" or "abandon
//              <why>". A rank that fails also sets "failed" at once, so peers still inside
//              a plugin's rendezvous stop waiting for it (SwapStore) instead of timing out.
//   5. commit: on all "ok", every rank replaces its State pointer (the calls that follow
//              route through the new generation) and its registry pointer (the reloaded
//              copy, if any) and shuts the replaced backends down;
//              otherwise every rank drops what it built and throws, keeping the old State.
// Every wait is bounded by the timeout and ends early when the group is aborted or the
// heartbeat finds a peer lost (a rank killed mid-swap): never a hang.
//
// Threading: State, setup_ (its registry pointer included) and swapAttempts_ belong to the
// calling thread; a reload writes only the registry copy this call made, never the one the
// group holds (which other groups and threads may read); AbortTargets (its own mutex) lets
// the supervisor's watchdog abort the backends being built too.
#include <algorithm>
#include <chrono>
#include <map>
#include <set>

#include "../supervisor/supervisor.h"
#include "commhost/errors.h"
#include "group_state.h"
#include "shadow.h"

namespace commhost {
namespace {

using Steady = std::chrono::steady_clock;

std::chrono::microseconds since(Steady::time_point t) {
  return std::chrono::duration_cast<std::chrono::microseconds>(Steady::now() - t);
}

std::string rankList(const std::vector<int>& ranks) {
  std::string out;
  for (int r : ranks) out += (out.empty() ? "" : ", ") + std::to_string(r);
  return out;
}

// "<word> <rest>" of a protocol value.
std::pair<std::string, std::string> splitWord(const std::string& v) {
  const auto space = v.find(' ');
  if (space == std::string::npos) return {v, ""};
  return {v.substr(0, space), v.substr(space + 1)};
}

const char* codeWord(ErrorCode code) { return errorCodeName(code); }

ErrorCode codeOf(const std::string& word) {
  for (ErrorCode c : {ErrorCode::Config, ErrorCode::Plugin, ErrorCode::Store, ErrorCode::Timeout, ErrorCode::Aborted,
                      ErrorCode::PeerLost, ErrorCode::InvalidArgument, ErrorCode::Backend, ErrorCode::NotSupported})
    if (word == errorCodeName(c)) return c;
  return ErrorCode::Plugin;
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

// "name=<file hash>,..." of those plugins' builds: what the ranks compare (no spaces).
std::string buildsOf(const PluginRegistry& registry, const std::vector<std::string>& plugins) {
  std::string out;
  for (const auto& p : plugins) out += (out.empty() ? "" : ",") + p + "=" + registry.fileHash(p);
  return out.empty() ? "-" : out;
}

}  // namespace

// onlyIfShadowAgrees: every backend `next` sends ops to that the current table does not
// must have run as a shadow here, sampled at least once, with no disagreement or failure.
void ProcessGroup::requireShadowAgreement(const RouteTable& next, const ErrorContext& where) const {
  const auto records = shadows_->report(state_->config->timeout());  // the comparisons still in flight too
  const RouteTable& now = state_->routes;
  for (size_t i = 0; i < next.backendNames().size(); ++i) {
    const std::string& name = next.backendNames()[i];
    if (!next.serves(static_cast<int>(i))) continue;
    const auto& names = now.backendNames();
    const auto it = std::find(names.begin(), names.end(), name);
    if (it != names.end() && now.serves(static_cast<int>(it - names.begin()))) continue;
    uint64_t samples = 0;
    for (const auto& r : records) {
      if (r.shadow != name) continue;
      samples += r.agreed;
      if (r.disagreed)
        raise(ErrorCode::Config, where,
              "backend '" + name + "' disagreed with '" + r.backend + "' as its shadow on " + r.op + " of up to " +
                  std::to_string(r.bytes) + " bytes in " + std::to_string(r.disagreed) + " of " +
                  std::to_string(r.samples) + " samples (first: " + r.firstDisagreement + ")",
              "find why before swapping to it");
      if (r.failed)
        raise(ErrorCode::Config, where,
              "backend '" + name + "' failed as the shadow of '" + r.backend + "' on " + r.op + " in " +
                  std::to_string(r.failed) + " of " + std::to_string(r.samples) + " samples (first: " + r.firstFailure +
                  ")",
              "fix it before swapping to it");
    }
    if (samples == 0)
      raise(
          ErrorCode::Config, where,
          "backend '" + name + "' would serve ops after the swap but never ran as a shadow in this group",
          "add `shadow: " + name + "` (and `sample: RATE`) to the routes it would take over and run some steps first");
  }
}

ReconfigureReport ProcessGroup::reconfigure(std::shared_ptr<const Config> newConfig,
                                            const ReconfigureOptions& options) {
  if (!newConfig)
    raise(ErrorCode::InvalidArgument, {name_, rank_, "reconfigure"}, "got no config",
          "pass a config loaded with this group's registry");
  return reconfigureOrRefuse(std::move(newConfig), options, "");
}

ReconfigureReport ProcessGroup::reconfigureOrRefuse(std::shared_ptr<const Config> newConfig,
                                                    const ReconfigureOptions& options, const std::string& loadError) {
  const auto t0 = Steady::now();
  const int64_t startedUs = supervisor::wallMicros();
  const uint64_t attempt = ++swapAttempts_;
  const uint64_t from = state_->generation;
  const ErrorContext where{name_, rank_, "reconfigure"};
  if (aborted_->load(std::memory_order_acquire))
    raise(ErrorCode::Aborted, where, "the group was aborted", "create a new group to continue");
  const Millis timeout = options.timeout.count() > 0 ? options.timeout : state_->config->timeout();
  const std::string round = "swap/" + std::to_string(attempt) + "/";
  const std::string generations = " (generation " + std::to_string(from) + " -> " + std::to_string(from + 1) +
                                  ", attempt " + std::to_string(attempt) + ")";

  ReconfigureReport report;
  supervisor::SwapRecord record;
  record.group = name_;
  record.rank = rank_;
  record.fromGeneration = record.toGeneration = from;
  record.startedUs = startedUs;
  const auto finish = [&](const std::string& outcome, const std::string& error) {
    report.total = since(t0);
    record.outcome = outcome;
    record.error = error;
    record.checkUs = report.check.count();
    record.drainUs = report.drain.count();
    record.buildUs = report.build.count();
    record.commitUs = report.commit.count();
    record.totalUs = report.total.count();
    record.kept = report.kept;
    record.built = report.built;
    record.removed = report.removed;
    if (supervisor_) supervisor_->recordSwap(record);
  };
  // Throws after recording the attempt as rolled back; nothing of the group changed.
  const auto fail = [&](ErrorCode code, const std::string& what, const std::string& hint) {
    finish("rolled_back", where.format() + what + generations);
    if (logger_) logger_->warn("reconfigure: " + what + generations);
    raise(code, where, what + generations + "; every rank keeps generation " + std::to_string(from), hint);
  };

  // Ends a wait of the protocol early: the group was aborted, or a peer is lost. Bare
  // messages: the phase that waited wraps them in its own (group, rank, phase). Captures
  // only what it shares: a backend may keep its store (and this check) after the swap.
  const auto stopIfBroken = [aborted = aborted_, monitor = monitor_] {
    if (aborted->load(std::memory_order_acquire)) throw AbortedError("the group was aborted during the swap");
    if (monitor && monitor->anyPeerLost.load(std::memory_order_acquire)) throw PeerLostError(monitor->lostText());
  };
  // The backends' rendezvous also stops once a rank reported failure.
  auto abandoned = std::make_shared<std::atomic<bool>>(false);
  auto protocolStore = std::make_shared<SwapStore>(store_, stopIfBroken);
  auto buildStore = std::make_shared<SwapStore>(
      store_, [stopIfBroken, abandoned, store = store_, failedKey = round + "failed"] {
        stopIfBroken();
        if (store->check({failedKey})) {
          abandoned->store(true);
          throw AbortedError("stopped building: " + toString(store->get(failedKey)));
        }
      });
  std::vector<std::string> keys(worldSize_);
  const auto allKeys = [&](const std::string& kind) {
    for (int r = 0; r < worldSize_; ++r) keys[r] = round + kind + std::to_string(r);
    return keys;
  };
  // Waits for every rank's `kind` key; a rank missing at the deadline is named. Returns
  // false with `code` and `why` (throws nothing) so the report phase can still agree on
  // an outcome with the others.
  struct Missed {
    ErrorCode code = ErrorCode::Timeout;
    std::string what, hint;
  };
  const auto tryGather = [&](const std::string& kind, const char* phase, std::vector<std::string>& values,
                             Missed& missed) {
    const auto names = allKeys(kind);
    try {
      protocolStore->wait(names, timeout);
    } catch (const TimeoutError&) {
      std::vector<int> missing;
      for (int r = 0; r < worldSize_; ++r)
        if (!store_->check({names[r]})) missing.push_back(globalRanks_[r]);
      missed = {
          ErrorCode::Timeout,
          "rank(s) " + rankList(missing) + " did not reach the " + phase + " phase within " + formatDuration(timeout),
          "every rank of the group must call reconfigure() at the same point of its ops; check those ranks' "
          "logs"};
      return false;
    } catch (const Error& e) {
      missed = {e.code(), std::string("stopped waiting in the ") + phase + " phase: " + e.what(),
                e.code() == ErrorCode::PeerLost ? "the job lost a rank; restart it" : "create a new group to continue"};
      return false;
    }
    values.clear();
    for (const auto& v : store_->multiGet(names)) values.push_back(toString(v));
    return true;
  };
  const auto gather = [&](const std::string& kind, const char* phase) {
    std::vector<std::string> values;
    Missed missed;
    if (!tryGather(kind, phase, values, missed)) fail(missed.code, missed.what, missed.hint);
    return values;
  };

  // 1. check
  std::string problem;
  std::shared_ptr<const PluginRegistry> registry = setup_.registry;
  std::vector<std::string> reloaded;
  std::string builds = "-";
  const char* badWord = "bad";  // "badplugin" when a reload failed
  try {
    if (!loadError.empty()) throw ConfigError(loadError);
    if (foreignIssue_.load(std::memory_order_acquire) > 0)
      raise(ErrorCode::Config, where,
            "reconfigure() was called during a Reducer iteration (between prepareForBackward and finalize), while "
            "other threads may issue on the group",
            "call reconfigure() (or syncPoint()) between iterations, after finalize()");
    if (newConfig->groupName() != state_->config->groupName())
      raise(ErrorCode::Config, where,
            "the new config names the group '" + newConfig->groupName() + "' but this group is '" +
                state_->config->groupName() + "'",
            "keep group.name");
    if (options.reloadPlugins) {
      // Into a copy: the registry this group holds may be shared (with the application,
      // with other groups, with other ranks' threads) and is read without a lock.
      const auto plugins = pluginsOf(*newConfig);
      std::shared_ptr<PluginRegistry> copy;
      for (const auto& p : plugins) {
        if (!registry->changedOnDisk(p)) continue;
        if (!copy) copy = std::make_shared<PluginRegistry>(*registry);
        try {
          if (copy->reload(p)) reloaded.push_back(p);
        } catch (const std::exception& e) {
          badWord = "badplugin";
          throw;
        }
      }
      if (copy) registry = copy;
      builds = buildsOf(*registry, plugins);
    }
    // The group's registry was scanned when the group was created: a plugin found only on
    // the new config's plugin_path is not in it.
    for (const auto& [backendName, ref] : newConfig->backends)
      if (!registry->find(ref.plugin))
        raise(ErrorCode::Config, where,
              "backend '" + backendName + "' names plugin '" + ref.plugin +
                  "', which this group's plugin registry does not hold",
              "put its folder on the plugin_path of the config the job started with (or COMMHOST_PLUGIN_PATH)");
    checkSameAvailability(*store_, round + "unavailable", *newConfig, *registry, where);
    const RouteTable next = RouteTable::forConfig(*newConfig, *registry);
    if (options.onlyIfShadowAgrees) {
      badWord = "badshadow";
      requireShadowAgreement(next, where);
      badWord = "bad";
    }
  } catch (const std::exception& e) {
    problem = e.what();
  }
  store_->set(round + "check/" + std::to_string(rank_),
              toBytes(problem.empty() ? "ok " + std::to_string(newConfig->hash) + " " + builds + " " + newConfig->source
                                      : std::string(badWord) + " " + problem));
  const auto checks = gather("check/", "check");
  // Every rank has entered this attempt, so every rank is done with the previous one.
  if (attempt > 1) {
    const std::string previous = "swap/" + std::to_string(attempt - 1) + "/";
    for (const char* kind : {"check/", "report/"}) store_->deleteKey(previous + kind + std::to_string(rank_));
    if (rank_ == 0)
      for (const char* key : {"failed", "outcome", "unavailable"}) store_->deleteKey(previous + key);
  }
  {
    // Ranks that refused for the same reason are listed once (one file shared by all).
    std::vector<int> bad;
    std::vector<std::pair<std::string, std::vector<int>>> reasons;
    bool pluginOnly = true, shadowOnly = true;
    for (int r = 0; r < worldSize_; ++r) {
      const auto [word, rest] = splitWord(checks[r]);
      if (word == "ok") continue;
      bad.push_back(globalRanks_[r]);
      pluginOnly = pluginOnly && word == "badplugin";
      shadowOnly = shadowOnly && word == "badshadow";
      const std::string reason = rest;  // a structured binding cannot be captured (C++17)
      auto it = std::find_if(reasons.begin(), reasons.end(), [&](const auto& x) { return x.first == reason; });
      if (it == reasons.end()) it = reasons.insert(reasons.end(), {reason, {}});
      it->second.push_back(globalRanks_[r]);
    }
    std::string why;
    for (const auto& [text, ranks] : reasons)
      why += reasons.size() == 1 ? text
                                 : (why.empty() ? "" : "; ") + std::string("rank(s) ") + rankList(ranks) + ": " + text;
    if (!bad.empty() && shadowOnly)
      fail(ErrorCode::Config, "onlyIfShadowAgrees refused the swap on rank(s) " + rankList(bad) + ": " + why,
           "shadow the new backend first (a route's `shadow: NAME`, `sample: RATE`) and check ProcessGroup::"
           "shadowReport() or `commhost trace analyze`; or swap without onlyIfShadowAgrees");
    if (!bad.empty() && pluginOnly)
      fail(ErrorCode::Plugin, "a changed plugin file could not be reloaded on rank(s) " + rankList(bad) + ": " + why,
           "fix or rebuild the plugin file named (`commhost plugins inspect FILE` shows why it is refused) and call "
           "reconfigure() again");
    if (!bad.empty())
      fail(ErrorCode::Config, "the new config is invalid on rank(s) " + rankList(bad) + ": " + why,
           "fix the config (`commhost config check FILE`) and call reconfigure() again");
    const auto [ok0, first] = splitWord(checks[0]);
    const auto [hash0, rest0] = splitWord(first);
    const auto [builds0, source0] = splitWord(rest0);
    std::string differ, differBuilds;
    for (int r = 1; r < worldSize_; ++r) {
      const auto [hash, rest] = splitWord(splitWord(checks[r]).second);
      const auto [rankBuilds, source] = splitWord(rest);
      if (hash == hash0 && rankBuilds != builds0)
        differBuilds += (differBuilds.empty() ? "" : "; ") + std::string("rank ") + std::to_string(globalRanks_[r]) +
                        " has " + rankBuilds;
      if (hash != hash0)
        differ += (differ.empty() ? "" : "; ") + std::string("rank ") + std::to_string(globalRanks_[r]) + " loaded " +
                  source + " with hash " + hash;
    }
    if (!differ.empty())
      fail(ErrorCode::Config,
           "the ranks passed different configs: rank " + std::to_string(globalRanks_[0]) + " loaded " + source0 +
               " with hash " + hash0 + " but " + differ,
           "every rank must pass the same config and overrides; compare `commhost config check` output on each");
    if (!differBuilds.empty())
      fail(ErrorCode::Plugin,
           "the ranks would run different plugin builds (name=file hash): rank " + std::to_string(globalRanks_[0]) +
               " has " + builds0 + " but " + differBuilds,
           "install the same plugin files on every rank (`commhost plugins inspect NAME` shows the file) and call "
           "reconfigure() again");
  }
  report.check = since(t0);

  // 2. drain
  const auto tDrain = Steady::now();
  std::string failure;  // "fail <code> <why>" or "abandon <why>"
  if (supervisor_) {
    const std::string pending = supervisor_->waitGroupIdle(monitor_.get(), supervisor_->clock().now() + timeout);
    if (!pending.empty())
      failure = std::string("fail ") + codeWord(ErrorCode::Timeout) + " " + pending + " was still in flight after " +
                formatDuration(timeout);
  }
  report.drain = since(tDrain);

  // 3. build
  const auto tBuild = Steady::now();
  std::shared_ptr<const State> next;
  if (failure.empty()) {
    try {
      next = buildState(newConfig, *registry, state_.get(), reloaded, round, buildStore, from + 1, &report.kept,
                        &report.built);
    } catch (const Error& e) {
      failure = abandoned->load() ? "abandon " + std::string(e.what())
                                  : std::string("fail ") + codeWord(e.code()) + " " + e.what();
    } catch (const std::exception& e) {
      failure = abandoned->load() ? "abandon " + std::string(e.what())
                                  : std::string("fail ") + codeWord(ErrorCode::Plugin) + " " + e.what();
    }
  }
  if (!failure.empty() && failure.rfind("fail ", 0) == 0)
    store_->compareSet(round + "failed", {},
                       toBytes("rank " + std::to_string(globalRanks_[rank_]) +
                               " failed: " + splitWord(splitWord(failure).second).second));
  report.build = since(tBuild);

  // 4. report, then one decision for all: the first rank to write `outcome` decides it.
  // Without it a rank whose wait for the reports timed out would roll back while a
  // slower one, seeing every report ok a moment later, committed.
  const auto tCommit = Steady::now();
  store_->set(round + "report/" + std::to_string(rank_), toBytes(failure.empty() ? "ok" : failure));
  std::vector<std::string> reports;
  Missed missed;
  const bool gathered = tryGather("report/", "report", reports, missed);
  std::vector<int> failed, abandonedBy;
  std::string why, abandonWhy;
  ErrorCode code = ErrorCode::Plugin;
  for (size_t r = 0; r < reports.size(); ++r) {
    const auto [word, rest] = splitWord(reports[r]);
    if (word == "fail") {
      const auto [codeName, text] = splitWord(rest);
      if (failed.empty()) code = codeOf(codeName);
      failed.push_back(globalRanks_[r]);
      why += (why.empty() ? "" : "; ") + std::string("rank ") + std::to_string(globalRanks_[r]) + ": " + text;
    } else if (word != "ok") {
      abandonedBy.push_back(globalRanks_[r]);
      if (abandonWhy.empty()) abandonWhy = rest;
    }
  }
  const bool allOk = gathered && failed.empty() && abandonedBy.empty();
  std::string outcome;
  try {
    outcome = toString(
        store_->compareSet(round + "outcome", {},
                           toBytes(allOk ? std::string("commit")
                                         : "rollback rank " + std::to_string(globalRanks_[rank_]) + ": " +
                                               (gathered ? std::string("a rank failed") : missed.what))));
  } catch (const std::exception& e) {
    outcome = std::string("rollback the store failed: ") + e.what();  // this rank cannot learn the decision
  }
  if (outcome != "commit") {
    if (!gathered)  // ranks still building stop at once instead of at the timeout
      try {
        store_->compareSet(round + "failed", {},
                           toBytes("rank " + std::to_string(globalRanks_[rank_]) + ": " + missed.what));
      } catch (const std::exception&) {
      }
    next.reset();  // the backends built for this attempt go; kept ones stay with state_
    abortTargets_->clearBuilding();
    report.kept.clear();
    report.built.clear();
    if (!gathered) fail(missed.code, missed.what, missed.hint);
    if (!failed.empty() || !abandonedBy.empty())
      fail(code,
           failed.empty() ? "rank(s) " + rankList(abandonedBy) + " stopped building: " + abandonWhy
                          : "the new backends failed on rank(s) " + rankList(failed) + ": " + why,
           "the group goes on with its current backends; fix the failing rank's backend and call reconfigure() "
           "again");
    fail(ErrorCode::Timeout,
         "every rank reported success here, but another rank had already decided to roll back (" +
             splitWord(outcome).second + ")",
         "the group goes on with its current backends; call reconfigure() again, with a longer "
         "ReconfigureOptions::timeout if a rank is slow to build");
  }

  // 5. commit: one pointer store switches every later call to the new generation.
  std::shared_ptr<const State> old = std::move(state_);
  state_ = std::move(next);
  setup_.config = newConfig;
  setup_.registry = registry;  // the old snapshot stays alive while its groups or owners hold it
  report.reloaded = reloaded;
  checkCollectives_ = newConfig->host.getBool("debug.check_collectives");  // read by this thread's calls
  abortTargets_->set(state_->backends);
  for (size_t i = 0; i < old->backends.size(); ++i) {
    const auto& b = old->backends[i];
    if (!b || std::find(state_->backends.begin(), state_->backends.end(), b) != state_->backends.end()) continue;
    report.removed.push_back(old->routes.backendNames()[i]);
    try {
      b->shutdown();  // drained above: returns once its threads are done
    } catch (const std::exception& e) {
      if (logger_) logger_->warn("backend '" + old->routes.backendNames()[i] + "' failed to shut down: " + e.what());
    }
  }
  old.reset();  // the replaced backends are destroyed here (the supervisor holds weak refs only)
  report.commit = since(tCommit);
  report.generation = state_->generation;
  record.toGeneration = report.generation;
  finish("committed", "");
  if (logger_)
    for (const auto& p : reloaded)
      logger_->info("reloaded plugin " + p + " from " + registry->find(p)->path + " (build " + registry->fileHash(p) +
                    ", reload " + std::to_string(registry->find(p)->reloads) + ")");
  if (logger_)
    logger_->info("reconfigured to generation " + std::to_string(report.generation) + " from " + newConfig->source +
                  " in " + std::to_string(report.total.count() / 1000) + " ms");
  return report;
}

}  // namespace commhost
