// SPDX-License-Identifier: Apache-2.0
#include "membership.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include "../supervisor/desync.h"
#include "../supervisor/group_monitor.h"
#include "../supervisor/supervisor.h"
#include "commhost/errors.h"
#include "sync_point.h"

namespace commhost {
namespace {

// Short enough that the last member to arrive is seen at once, long enough that the
// polling costs the store nothing measurable (one check per rank per slice).
constexpr std::chrono::milliseconds kPollSlice{20};

std::string ranksText(const std::vector<int>& ranks) {
  std::string out;
  for (int r : ranks) out += (out.empty() ? "" : ", ") + std::to_string(r);
  return out;
}

const char* outcomeOf(MembershipRound::Kind kind) {
  switch (kind) {
    case MembershipRound::Kind::Shrink: return "shrunk";
    case MembershipRound::Kind::Grow: return "grew";
    case MembershipRound::Kind::Join: return "joined";
  }
  return "";
}

}  // namespace

std::string encodeRanks(const std::vector<int>& ranks) {
  std::string out;
  for (int r : ranks) out += (out.empty() ? "" : ",") + std::to_string(r);
  return out;
}

std::vector<int> decodeRanks(const std::string& text, int limit, const std::string& key) {
  std::vector<int> out;
  size_t at = 0;
  while (at < text.size()) {
    const size_t comma = std::min(text.find(',', at), text.size());
    const std::string item = text.substr(at, comma - at);
    char* end = nullptr;
    const long r = std::strtol(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || r < 0 || r >= limit || (!out.empty() && r <= out.back()))
      throw StoreError("the store's '" + key + "' holds '" + text + "', not ascending ranks below " +
                       std::to_string(limit) +
                       ": another program wrote that key. Next: give each job a store (or group name) of its own");
    out.push_back(static_cast<int>(r));
    at = comma + 1;
  }
  return out;
}

std::string JoinTicket::encode() const {
  std::ostringstream out;
  out << storePath << "\n"
      << basePath << "\n"
      << round << " " << generation << " " << seq << " " << syncCount << " " << epochDone << " " << joinsDone << "\n"
      << refused << "\n"
      << yaml;
  return out.str();
}

JoinTicket JoinTicket::decode(const std::string& text, const std::string& key) {
  JoinTicket t;
  std::istringstream in(text);
  std::string numbers;
  std::getline(in, t.storePath);
  std::getline(in, t.basePath);
  std::getline(in, numbers);
  std::getline(in, t.refused);
  std::istringstream n(numbers);
  if (!(n >> t.round >> t.generation >> t.seq >> t.syncCount >> t.epochDone >> t.joinsDone) || t.storePath.empty() ||
      t.basePath.empty())
    throw StoreError("the store's '" + key + "' is not a join ticket: another program wrote that key");
  t.yaml.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return t;
}

MembershipRound::MembershipRound(ProcessGroup::Impl& group, Kind kind, std::chrono::milliseconds timeout,
                                 uint64_t joinsUpTo, JoinTicket ticket)
    : g_(group),
      kind_(kind),
      timeout_(timeout.count() > 0 ? timeout : g_.setup_.config->timeout()),
      joinsUpTo_(joinsUpTo),
      ticket_(std::move(ticket)),
      round_(kind == Kind::Join ? ticket_.round : g_.membershipRounds_),
      prefix_("member/" + std::to_string(round_) + "/"),
      where_{g_.name_, g_.rank_,
             kind == Kind::Shrink ? "shrink"
             : kind == Kind::Grow ? "grow"
                                  : "join"},
      minRanks_(static_cast<int>(g_.setup_.config->host.getInt("supervisor.min_ranks"))),
      generation_(kind == Kind::Join ? ticket_.generation : g_.state_->generation),
      oldRank_(g_.rank_),
      oldSize_(g_.worldSize_),
      oldGlobal_(g_.globalRanks_),
      oldPath_(g_.storePath_),
      oldStore_(g_.store_),
      oldLedger_(g_.ledger_),
      oldSyncRounds_(g_.sync_ ? g_.sync_->round + 1 : 0),
      oldFirstRound_(g_.generationFirstRound_) {
  // Refused before the round is counted, so that the round numbers stay alike on every rank.
  if (kind != Kind::Join && g_.foreignIssue_.load(std::memory_order_acquire) > 0)
    raise(ErrorCode::InvalidArgument, where_,
          "called inside a span of beginForeignIssue() (a Reducer iteration): other threads may still issue ops "
          "on this group",
          "finish or drop the Reducer iteration (destroy the Reducer), then call shrink()");
  g_.membershipRounds_ = round_ + 1;
  // A live rank beats once per interval (its heartbeat thread wakes at most every 100 ms):
  // two intervals without a beat is a stopped heartbeat, not a slow one.
  if (g_.supervisor_) lossGrace_ = 2 * g_.supervisor_->settings().heartbeatInterval + std::chrono::milliseconds(250);
}

std::chrono::microseconds MembershipRound::since(Steady::time_point t) const {
  return std::chrono::duration_cast<std::chrono::microseconds>(Steady::now() - t);
}

// A joiner is not a member yet: its global rank is its launch rank (the world group's).
int MembershipRound::myGlobal() const { return kind_ == Kind::Join ? g_.setup_.rank : oldGlobal_[oldRank_]; }

bool MembershipRound::isMember(int global) const {
  return std::binary_search(members_.begin(), members_.end(), global);
}

ShrinkReport MembershipRound::run() {
  agree();
  adoptKeysOfTheGone();
  build();
  confirm();
  commit();
  return report_;
}

void MembershipRound::agree() {
  const auto t = Steady::now();
  deadline_ = t + timeout_;
  if (kind_ == Kind::Shrink) agreeShrink();
  else if (kind_ == Kind::Grow) agreeGrow();
  else {
    members_ = decodeRanks(toString(oldStore_->get(prefix_ + "decision")), 1 << 30, prefix_ + "decision");
    report_.seq = ticket_.seq;
  }
  checkMembers();
  report_.agree = since(t);
}

bool MembershipRound::heartbeatStopped(int r) {
  const int64_t beat = oldStore_->add(supervisor::heartbeatKey(r), 0);
  const auto now = Steady::now();
  auto [it, fresh] = beats_.try_emplace(r, beat, now);
  if (!fresh && it->second.first != beat) it->second = {beat, now};
  return now - it->second.second >= lossGrace_;
}

std::vector<int> MembershipRound::posted(bool& settled) {
  // Gone for good: lost (the heartbeat's or a backend's verdict) or left (destroyed its
  // group). Without the supervisor neither is known: the timeout alone ends the wait.
  std::map<int, std::string> lost;
  std::set<int> left;
  if (g_.monitor_) {
    lost = g_.monitor_->lost();
    left = g_.monitor_->left();
  }
  std::vector<int> out;
  settled = true;
  for (int r = 0; r < oldSize_; ++r) {
    if (r == oldRank_ || oldStore_->check({prefix_ + "alive/" + std::to_string(r)})) {
      out.push_back(r);
    } else if (left.count(r) || oldStore_->check({supervisor::leftKey(r)})) {
      continue;  // destroyed its group
    } else if (!lost.count(r) || !heartbeatStopped(r)) {
      settled = false;  // neither here nor gone (lost, or destroyed its group): wait for it
    }
  }
  return out;
}

void MembershipRound::agreeShrink() {
  oldStore_->set(prefix_ + "alive/" + std::to_string(oldRank_),
                 toBytes(std::to_string(g_.seq()) + " " + std::to_string(g_.syncCount_)));
  const std::string decisionKey = prefix_ + "decision";
  std::vector<int> proposal;
  for (;;) {
    bool settled = false;
    proposal = posted(settled);
    if (settled || Steady::now() >= deadline_ || oldStore_->check({decisionKey})) break;
    std::this_thread::sleep_for(kPollSlice);
  }
  std::vector<int> globals;
  for (int r : proposal) globals.push_back(oldGlobal_[r]);
  std::sort(globals.begin(), globals.end());
  members_ = decodeRanks(toString(oldStore_->compareSet(decisionKey, {}, toBytes(encodeRanks(globals)))), 1 << 30,
                         decisionKey);
  for (int r = 0; r < oldSize_; ++r)
    if (!isMember(oldGlobal_[r])) report_.removed.push_back(r);
  // A rank left out learns so in checkMembers(); the members' alive keys may be long gone
  // (swept a round after theirs) when it was stopped and resumes late.
  if (!isMember(myGlobal())) return;
  // The group continues from the highest seq a member issued, so that every member's
  // next op gets the same seq (a member may have issued one more before it failed), and
  // from the highest syncPoint() count, so that the next sync agreement switches all at
  // one count (a member may have passed one more step boundary).
  uint64_t seq = 0, count = 0;
  for (int r = 0; r < oldSize_; ++r) {
    if (!isMember(oldGlobal_[r])) continue;
    std::istringstream v(toString(oldStore_->get(prefix_ + "alive/" + std::to_string(r))));
    uint64_t s = 0, c = 0;
    v >> s >> c;
    seq = std::max(seq, s);
    count = std::max(count, c);
  }
  report_.seq = seq;
  syncCount_ = count;
}

// Every member reaches this sync point (a syncPoint() agreement chose it), so the members
// stay; the join requests since the last grow are added, by global rank.
void MembershipRound::agreeGrow() {
  std::vector<int> requests, globals = oldGlobal_;
  for (uint64_t j = g_.joinsDone_ + 1; j <= joinsUpTo_; ++j) {
    const std::string key = g_.name_ + "/join/" + std::to_string(j) + "/rank";
    const int global = std::atoi(toString(g_.setup_.store->get(key)).c_str());
    requests.push_back(global);
    if (std::find(globals.begin(), globals.end(), global) == globals.end()) globals.push_back(global);
  }
  std::sort(globals.begin(), globals.end());
  const std::string decisionKey = prefix_ + "decision";
  members_ = decodeRanks(toString(oldStore_->compareSet(decisionKey, {}, toBytes(encodeRanks(globals)))), 1 << 30,
                         decisionKey);
  report_.seq = g_.seq();
  admitJoiners(requests);
}

// Each request gets its ticket (every member writes the same one): a rank already a
// member (a second process claiming its rank) is refused.
void MembershipRound::admitJoiners(const std::vector<int>& requests) {
  JoinTicket t;
  t.storePath = oldPath_;
  t.basePath = g_.basePath_;
  t.round = round_;
  t.generation = generation_;
  t.seq = g_.seq();
  t.syncCount = g_.syncCount_;
  t.epochDone = g_.syncDone_;
  t.joinsDone = joinsUpTo_;
  t.yaml = g_.state_->config->effectiveYaml;
  for (size_t i = 0; i < requests.size(); ++i) {
    JoinTicket mine = t;
    if (std::find(oldGlobal_.begin(), oldGlobal_.end(), requests[i]) != oldGlobal_.end())
      mine.refused = "global rank " + std::to_string(requests[i]) + " is a member of group " + g_.name_ +
                     " already (its process is alive): a second process cannot take its place";
    const uint64_t j = g_.joinsDone_ + 1 + i;
    const std::string request = g_.name_ + "/join/" + std::to_string(j) + "/";
    g_.setup_.store->set(request + "admit", toBytes(mine.encode()));
    ticketKeys_.push_back(request + "admit");
    ticketKeys_.push_back(request + "rank");
  }
}

std::string MembershipRound::ranksLeftOut() const {
  std::string out;
  for (int r : report_.removed) out += (out.empty() ? "" : ", ") + std::to_string(oldGlobal_[r]);
  return out;
}

void MembershipRound::checkMembers() {
  if (!isMember(myGlobal())) {
    const std::string why = "this rank was removed from group " + g_.name_ + " at generation " +
                            std::to_string(generation_) + ": the survivors (ranks " + ranksText(members_) +
                            ") decided without it, as it had not taken part in membership round " +
                            std::to_string(round_) + " within " + formatDuration(timeout_) +
                            " (stopped, or too slow to reach shrink())";
    if (g_.abortTargets_) g_.abortTargets_->abortAll(why);
    record("removed", why);
    raise(ErrorCode::Aborted, where_, why,
          "this process can no longer take part in the job: end it (a launcher with restarts may start a new one)");
  }
  if (static_cast<int>(members_.size()) < minRanks_) {
    const std::string why = "only " + std::to_string(members_.size()) + " of " + std::to_string(oldSize_) +
                            " ranks are left (lost: " + ranksLeftOut() + "), below supervisor.min_ranks " +
                            std::to_string(minRanks_) + "; the group stays aborted at generation " +
                            std::to_string(generation_);
    record("refused", why);
    raise(ErrorCode::PeerLost, where_, why,
          "restart the job (from its last checkpoint) once the lost ranks' hosts are back, or lower "
          "supervisor.min_ranks");
  }
}

void MembershipRound::build() {
  const auto t = Steady::now();
  g_.rank_ = static_cast<int>(std::find(members_.begin(), members_.end(), myGlobal()) - members_.begin());
  g_.worldSize_ = static_cast<int>(members_.size());
  g_.globalRanks_ = members_;
  g_.storePath_ = g_.basePath_ + "/m" + std::to_string(round_);
  g_.ledger_ = std::make_shared<KeyLedger>(std::make_shared<PrefixStore>(g_.storePath_, g_.setup_.store));
  g_.store_ = g_.ledger_;
  // The new generation answers to aborts of its own from now on: the old generation's
  // watchdog may still abort the old one (another verdict on an old work), and that must
  // not reach the backends being built.
  oldTargets_ = g_.abortTargets_;
  oldAborted_ = g_.aborted_;
  g_.aborted_ = std::make_shared<std::atomic<bool>>(false);
  g_.abortTargets_ = std::make_shared<ProcessGroup::AbortTargets>();
  g_.abortTargets_->aborted = g_.aborted_;
  // The backends' rendezvous stops as soon as a member reports failure, or the old
  // generation's heartbeat finds a member lost, instead of waiting until the timeout.
  auto stop = [store = oldStore_, key = prefix_ + "failed", monitor = g_.monitor_, members = members_,
               global = oldGlobal_] {
    if (store->check({key})) throw PeerLostError(toString(store->get(key)));
    if (!monitor) return;
    for (const auto& [peer, why] : monitor->lost())
      if (peer >= 0 && peer < static_cast<int>(global.size()) &&
          std::binary_search(members.begin(), members.end(), global[peer]))
        throw PeerLostError("member " + std::to_string(global[peer]) + " was lost: " + why);
  };
  auto buildStore = std::make_shared<SwapStore>(g_.store_, stop);
  try {
    // A tuner answers for the new membership (its world size): the members agree on the
    // table before any backend is built from it (else they would build different ones).
    std::optional<RouteTable> routes;
    if (g_.setup_.config->tuner) routes = g_.agreedRoutes(*buildStore);
    next_ = g_.buildState(g_.setup_.config, *g_.setup_.registry, nullptr, {}, "", buildStore, generation_ + 1, nullptr,
                          nullptr, nullptr, routes ? &*routes : nullptr);
    g_.publishKeyManifest();
  } catch (const std::exception& e) {
    const auto* error = dynamic_cast<const Error*>(&e);
    ErrorCode code = error ? error->code() : ErrorCode::Plugin;
    // A backend reports the rendezvous that `stop` ended as its own failure to start: the
    // cause is a member lost (or a member's failure), which the next round can go around.
    // Any other error (a config the ranks disagree on) stands as it is.
    if (code == ErrorCode::Plugin) {
      try {
        stop();
      } catch (const PeerLostError&) {
        code = ErrorCode::PeerLost;
      } catch (...) {
        // The store itself failed (it may be why the build did): the build's error stands.
      }
    }
    failRound(code, std::string("building the backends failed: ") + e.what());
  }
  report_.build = since(t);
}

void MembershipRound::confirm() {
  const auto t = Steady::now();
  deadline_ = t + timeout_;
  g_.store_->set("built/" + std::to_string(g_.rank_), toBytes("1"));
  const std::string failedKey = prefix_ + "failed";
  for (int waiting = 0;;) {
    if (oldStore_->check({failedKey})) failRound(ErrorCode::PeerLost, toString(oldStore_->get(failedKey)));
    waiting = 0;
    for (int r = 0; r < g_.worldSize_; ++r)
      if (!g_.store_->check({"built/" + std::to_string(r)})) ++waiting;
    if (waiting == 0) break;
    // The old generation's verdicts are not read here: a member that confirmed and
    // committed first shuts its old backends down, which the others' old backends report
    // as that member lost. A member that dies now fails the round at the timeout.
    if (Steady::now() >= deadline_)
      failRound(ErrorCode::Timeout,
                std::to_string(waiting) + " member(s) did not confirm their build within " + formatDuration(timeout_));
    std::this_thread::sleep_for(kPollSlice);
  }
  report_.confirm = since(t);
}

void MembershipRound::failRound(ErrorCode code, const std::string& why) {
  try {
    oldStore_->compareSet(prefix_ + "failed", {}, toBytes("rank " + std::to_string(myGlobal()) + ": " + why));
  } catch (const std::exception&) {
    // The store is gone too: the peers fail on their own waits.
  }
  // What this round built goes; the old generation stays as it was (aborted after a
  // loss, running when the round was a grow).
  if (oldTargets_) {
    g_.abortTargets_->abortAll("membership round " + std::to_string(round_) + " failed: " + why);
    g_.abortTargets_ = oldTargets_;
    g_.aborted_ = oldAborted_;
  }
  next_.reset();
  g_.rank_ = oldRank_;
  g_.worldSize_ = oldSize_;
  g_.globalRanks_ = oldGlobal_;
  g_.storePath_ = oldPath_;
  g_.store_ = oldStore_;
  // What the failed build wrote under its own path, and the tickets it handed out, go with
  // the next round's sweep (every member is past this round by then).
  if (g_.ledger_ != oldLedger_) g_.sweepNextRound_.push_back({g_.ledger_, members_, round_, round_, 0});
  g_.ledger_ = oldLedger_;
  for (auto& key : ticketKeys_) g_.jobKeysNextRound_.push_back(std::move(key));
  record("failed", why);
  raise(code, where_, "membership round " + std::to_string(round_) + " failed: " + why,
        kind_ == Kind::Shrink ? "call shrink() again on every survivor: the next round agrees on who is left"
                              : "the members go on as they were; a joiner may ask again");
}

void MembershipRound::commit() {
  const auto t = Steady::now();
  std::shared_ptr<const ProcessGroup::State> old = std::move(g_.state_);
  g_.state_ = std::move(next_);
  g_.abortTargets_->set(g_.state_->backends);  // the new generation's own (build)
  g_.seq_.store(report_.seq, std::memory_order_relaxed);
  if (kind_ == Kind::Shrink) g_.syncCount_ = syncCount_;
  // Sync agreements start over in the new store: one in progress (some members had posted,
  // some had not) ends with the old membership.
  if (g_.sync_) {
    g_.sync_->round = 0;
    g_.sync_->posted = false;
    g_.sync_->epoch = g_.sync_->switchAt = g_.sync_->joins = 0;
  }
  // So do hot swaps' attempt numbers (their keys' names): a member lost during a swap
  // leaves the others' counts apart, one failing inside the swap and another in the op
  // before it, and their next swap would wait on keys of different attempts.
  g_.swapAttempts_ = 0;
  g_.logger_ = std::make_shared<Logger>("commhost", "group " + g_.name_ + " rank " + std::to_string(g_.rank_));
  // The supervisor watches the new membership; the lease on it is taken before the old
  // one is given back, so its flight recorder (and its threads) carry on.
  auto oldSupervisor = std::move(g_.supervisor_);
  auto oldMonitor = std::move(g_.monitor_);
  g_.startSupervision();
  if (oldSupervisor) {
    if (g_.supervisor_) g_.supervisor_->moveHooks(oldMonitor.get(), g_.monitor_.get());
    supervisor::Supervisor::release(std::move(oldSupervisor), oldMonitor.get());
  }
  if (old) retire(std::move(old));
  sweepEarlierRounds();
  report_.generation = g_.state_->generation;
  report_.rank = g_.rank_;
  report_.worldSize = g_.worldSize_;
  for (int global : members_) {
    const auto it = std::find(oldGlobal_.begin(), oldGlobal_.end(), global);
    report_.oldRanks.push_back(it == oldGlobal_.end() ? -1 : static_cast<int>(it - oldGlobal_.begin()));
  }
  for (int r : report_.removed) report_.removedGlobal.push_back(oldGlobal_[r]);
  report_.commit = since(t);
  record(outcomeOf(kind_), "");
  g_.logger_->warn(std::string(outcomeOf(kind_)) + ": " + std::to_string(oldSize_) + " -> " +
                   std::to_string(g_.worldSize_) + " ranks (" +
                   (report_.removed.empty() ? "nobody removed" : "removed " + ranksLeftOut()) + "; this rank was " +
                   (oldRank_ < 0 ? "not a member" : std::to_string(oldRank_)) + ") at generation " +
                   std::to_string(report_.generation) + " in " + std::to_string(report_.total.count() / 1000) + " ms");
}

void MembershipRound::retire(std::shared_ptr<const ProcessGroup::State> old) {
  for (const auto& b : old->backends) {
    if (!b) continue;
    try {
      b->shutdown();  // aborted after a loss (its works failed); idle at a grow's sync point
    } catch (const std::exception& e) {
      g_.logger_->warn(std::string("a backend of the old membership failed to shut down: ") + e.what());
    }
  }
}

namespace {
// A round's decision and failure stay for the job's life: a rank the round removed reads
// them whenever it resumes (a stopped process), and without the decision it would decide
// a membership of its own. One or two short keys per round.
bool isRoundOutcome(const std::string& key) {
  const size_t slash = key.rfind('/');
  if (key.compare(0, 7, "member/") != 0 || slash == std::string::npos) return false;
  const std::string last = key.substr(slash + 1);
  return (last == "decision" || last == "failed") && key.find('/', 7) == slash;
}
}  // namespace

// The ranks this round leaves out cannot sweep what they wrote: the members take it into
// their ledgers, from the old generation and the one before (each swept a round later),
// now, while no member has swept either (sweeps come at commits, after every confirm).
void MembershipRound::adoptKeysOfTheGone() {
  if (kind_ == Kind::Join) return;        // a joiner was in no earlier generation of the group
  std::vector<std::pair<int, int>> gone;  // (rank in the old generation, global rank)
  for (size_t i = 0; i < oldGlobal_.size(); ++i)
    if (!isMember(oldGlobal_[i])) gone.emplace_back(static_cast<int>(i), oldGlobal_[i]);
  if (gone.empty()) return;
  try {
    const GenerationKeys old = oldGeneration();
    if (oldLedger_)
      for (const auto& [rank, global] : gone) adoptKeysOf(*oldLedger_, rank, global, old);
    for (const auto& gen : g_.sweepNextRound_)
      for (const auto& [rank, global] : gone) {
        const auto it = std::find(gen.globals.begin(), gen.globals.end(), global);
        if (it != gen.globals.end()) adoptKeysOf(*gen.ledger, static_cast<int>(it - gen.globals.begin()), global, gen);
      }
  } catch (const std::exception& e) {
    g_.logger_->warn(std::string("could not list the store keys of the ranks left out (they stay; the round goes "
                                 "on): ") +
                     e.what());
  }
}

void MembershipRound::adoptKeysOf(KeyLedger& ledger, int rank, int global, const GenerationKeys& gen) {
  ledger.adoptManifest(global);
  const std::string r = std::to_string(rank);
  for (const std::string& key :
       {supervisor::heartbeatKey(rank), supervisor::leftKey(rank), supervisor::progressKey(rank), "built/" + r})
    ledger.adopt(key);
  // Every round run in the generation (those that failed, then the one that ended it).
  for (uint64_t k = gen.firstRound; k <= gen.endingRound; ++k)
    ledger.adopt("member/" + std::to_string(k) + "/alive/" + r);
  for (uint64_t n = 0; n < gen.syncRounds; ++n) {
    ledger.adopt("sync/" + std::to_string(n) + "/seen/" + r);
    if (rank == 0) ledger.adopt("sync/" + std::to_string(n) + "/decision");  // rank 0 decides
  }
}

GenerationKeys MembershipRound::oldGeneration() const {
  return {oldLedger_, oldGlobal_, oldFirstRound_, round_, oldSyncRounds_};
}

// Every member has committed the round before this one and taken part in all of this one,
// so none still reads the generation before the one this round ended (its backends'
// rendezvous, heartbeats, progress, the round keys), a failed round's, nor the join
// tickets of the round before.
void MembershipRound::sweepEarlierRounds() {
  try {
    for (const auto& gen : g_.sweepNextRound_) gen.ledger->sweep(isRoundOutcome);
    for (const auto& key : g_.jobKeysNextRound_) g_.setup_.store->deleteKey(key);
  } catch (const std::exception& e) {
    g_.logger_->warn(std::string("could not delete the store keys of earlier membership rounds (they stay; the job "
                                 "goes on): ") +
                     e.what());
  }
  g_.sweepNextRound_.clear();
  g_.jobKeysNextRound_ = std::move(ticketKeys_);
  ticketKeys_.clear();
  if (oldLedger_) g_.sweepNextRound_.push_back(oldGeneration());
  g_.generationFirstRound_ = round_ + 1;  // the rounds the new generation runs count from here
  // The swaps' leftovers were keys of the old generation's store, in its ledger now.
  g_.swapLeftovers_.clear();
}

void MembershipRound::record(const std::string& outcome, const std::string& error) {
  report_.total = since(t0_);
  if (!g_.supervisor_) return;
  MembershipRecord r;
  r.group = g_.name_;
  r.rankBefore = oldRank_;
  const bool changed = outcome == outcomeOf(kind_);
  r.rankAfter = changed ? g_.rank_ : -1;
  r.worldBefore = oldSize_;
  r.worldAfter = changed ? g_.worldSize_ : oldSize_;
  r.fromGeneration = generation_;
  r.toGeneration = changed ? generation_ + 1 : generation_;
  for (int old : report_.removed) r.removed.push_back(oldGlobal_[old]);
  r.outcome = outcome;
  r.error = error;
  r.startedUs = std::chrono::duration_cast<std::chrono::microseconds>(
                    std::chrono::system_clock::now().time_since_epoch() - (Steady::now() - t0_))
                    .count();
  r.agreeUs = report_.agree.count();
  r.buildUs = report_.build.count();
  r.confirmUs = report_.confirm.count();
  r.commitUs = report_.commit.count();
  r.totalUs = report_.total.count();
  g_.supervisor_->recordMembership(std::move(r));
}

void ProcessGroup::Impl::growAt(uint64_t joinsUpTo) {
  MembershipRound round(*this, MembershipRound::Kind::Grow, {}, joinsUpTo);
  // Done either way: a joiner that failed (or died) is not waited for again; it may ask anew.
  try {
    round.run();
  } catch (...) {
    joinsDone_ = joinsUpTo;
    throw;
  }
  joinsDone_ = joinsUpTo;
}

void ProcessGroup::Impl::joinRunningJob() {
  logger_ = std::make_shared<Logger>("commhost", "group " + name_ + " joining");
  const ErrorContext where{name_, setup_.rank, "join"};
  const auto timeout = setup_.config->timeout();
  const std::string base = name_ + "/join/";
  const int64_t request = setup_.store->add(base + "count", 1);
  setup_.store->set(base + std::to_string(request) + "/rank", toBytes(std::to_string(setup_.rank)));
  logger_->info("global rank " + std::to_string(setup_.rank) + " asked to join group " + name_ + " (request " +
                std::to_string(request) + "); waiting for the members' next syncPoint()");
  const std::string key = base + std::to_string(request) + "/admit";
  try {
    setup_.store->wait({key}, timeout);
  } catch (const Error& e) {
    raise(ErrorCode::Timeout, where,
          "no member of the running job admitted this rank within " + formatDuration(timeout) + " (" + e.what() + ")",
          "the members admit joiners at syncPoint() with group.sync_poll > 0 (`commhost run --max-restarts` sets "
          "it); check that the job is still running and calls syncPoint() every step");
  }
  const JoinTicket ticket = JoinTicket::decode(toString(setup_.store->get(key)), key);
  if (!ticket.refused.empty())
    raise(ErrorCode::InvalidArgument, where, "the members refused this rank: " + ticket.refused,
          "start a rank that is not running, or none");
  // The members' config (they may have swapped since the job started), with this rank's
  // overrides; into a copy of the registry, as a sync point loads one, which this rank then
  // keeps: it holds the plugins that config names (one swapped in may not have been opened).
  auto registry = std::make_shared<PluginRegistry>(*setup_.registry);
  setup_.config = std::make_shared<Config>(
      loadConfigText(ticket.yaml, setup_.config->source + " (as the members run it)", *registry, setup_.overrides));
  setup_.registry = registry;
  rank_ = -1;
  worldSize_ = 0;
  storePath_ = ticket.storePath;
  basePath_ = ticket.basePath;
  ledger_ = std::make_shared<KeyLedger>(std::make_shared<PrefixStore>(storePath_, setup_.store));
  store_ = ledger_;
  joinsDone_ = ticket.joinsDone;
  MembershipRound(*this, MembershipRound::Kind::Join, timeout, 0, ticket).run();
  startSyncPoller();
  // The joiner's next syncPoint() is the one the members made at the round's count (its
  // step is the one they run next), and its agreements continue theirs.
  syncCount_ = ticket.syncCount - 1;
  syncDone_ = ticket.epochDone;
}

ShrinkReport ProcessGroup::Impl::shrink(const ShrinkOptions& options) {
  return MembershipRound(*this, MembershipRound::Kind::Shrink, options.timeout).run();
}

}  // namespace commhost
