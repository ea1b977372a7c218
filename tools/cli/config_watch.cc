// SPDX-License-Identifier: Apache-2.0
#include "config_watch.h"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <iostream>
#include <sstream>

#include "commhost/errors.h"
#include "commhost/logging.h"

namespace commhost::cli {
namespace {

// How long a publication may wait for the ranks' store: the launcher's poll loop (which
// watches the ranks and forwards signals) waits while it runs, so a store that does not
// answer (its rank stopped, or not serving yet) costs at most this, not group.timeout;
// the next edit or SIGHUP tries again.
constexpr std::chrono::milliseconds kPublishTimeout{5000};

std::string readFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw ConfigError("cannot read config file '" + path + "'");
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

ConfigWatch::ConfigWatch(std::string path, std::string text, std::vector<std::string> sets, std::string masterAddr,
                         int masterPort, int worldSize)
    : path_(std::move(path)),
      masterAddr_(std::move(masterAddr)),
      masterPort_(masterPort),
      worldSize_(worldSize),
      lastText_(std::move(text)) {
  overrides_.set = std::move(sets);
  group_ = load(lastText_).groupName();
}

// As the ranks load an epoch's YAML (ProcessGroup::applyEpoch): text, not the file, so a
// relative plugin_path means the same here and there.
Config ConfigWatch::load(const std::string& text) { return loadConfigText(text, path_, registry_, overrides_); }

Store& ConfigWatch::store(const Config& config) {
  if (store_) return *store_;
  const PluginEntry& entry = registry_.require(config.store.plugin, PluginKind::Store);
  OptionValues options = config.store.options;
  // A client of the ranks' store: never the server (rank 0 hosts it with serve: auto),
  // and one that gives up after kPublishTimeout (a store's own timeout, as tcp's, rules
  // its connect and its calls; ctx.timeout is for stores without one).
  for (const auto& spec : entry.descriptor->options) {
    const std::string key = spec.key;
    if (key == "serve") options.set("serve", std::string("never"));
    if (key == "timeout" && spec.type == OptionType::Duration)
      options.set("timeout", std::min(options.getDuration("timeout"), kPublishTimeout));
  }
  StoreContext ctx;
  ctx.rank = -1;
  ctx.worldSize = worldSize_;
  ctx.masterAddr = masterAddr_;
  ctx.masterPort = masterPort_;
  ctx.timeout = std::min(config.timeout(), kPublishTimeout);
  ctx.logger = std::make_shared<Logger>("commhost." + config.store.plugin, "commhost run --watch");
  store_ = entry.descriptor->createStore(options, ctx);
  storeLibrary_ = entry.library;
  // Epochs count on from what the store holds (a second launcher, a test that published).
  // The ranks apply the latest one at their first syncPoint() (sync_point.cc): in a store
  // that outlives jobs (etcd) that may be an earlier job's, which is said.
  const std::string latest = group_ + "/pending/epoch";
  if (store_->check({latest})) {
    epoch_ = std::stoull(toString(store_->get(latest)));
    if (epoch_ > 0)
      std::cerr << "commhost run: the store already held epoch " << epoch_ << " of group " << group_
                << " (another launcher's, or an earlier job's in a store that outlives jobs); publishing " << epoch_ + 1
                << std::endl;
  }
  return *store_;
}

void ConfigWatch::changed(const std::string& why, bool force) {
  const std::string name = "commhost run: " + path_ + " (" + why + ")";
  std::string text;
  try {
    text = readFile(path_);
    if (text == lastText_ && !force) return;  // editors write twice; a save with no change is none
    const Config config = load(text);
    if (config.groupName() != group_)
      throw ConfigError("group.name changed from '" + group_ + "' to '" + config.groupName() +
                        "'; a running job keeps its group's name");
    Store& s = store(config);
    const uint64_t epoch = epoch_ + 1;
    const std::string prefix = group_ + "/pending/" + std::to_string(epoch) + "/";
    s.set(prefix + "source", toBytes(path_));
    s.set(prefix + "yaml", toBytes(text));
    s.set(group_ + "/pending/epoch", toBytes(std::to_string(epoch)));
    epoch_ = epoch;
    lastText_ = text;
    std::cerr << name << ": published as epoch " << epoch << "; every rank switches to it at the same syncPoint()"
              << std::endl;
  } catch (const ConfigError& e) {
    lastText_ = text;  // reported once; the next edit is read again
    std::cerr << name << ": invalid, the job goes on with its current config:\n" << e.what() << std::endl;
  } catch (const std::exception& e) {
    store_.reset();  // reconnects next time (before its plugin's code may go)
    std::cerr << name
              << ": not published (the job goes on with its current config; save the file again or send "
                 "SIGHUP to retry): "
              << e.what() << std::endl;
  }
}

}  // namespace commhost::cli
