// SPDX-License-Identifier: Apache-2.0
#include "config_watch.h"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <iostream>
#include <sstream>

#include "commhost/errors.h"
#include "commhost/logging.h"
#include "job_store.h"

namespace commhost::cli {
namespace {

// How long a publication may wait for the ranks' store, on the publisher's thread: a
// store that does not answer (its rank stopped, or not serving yet) costs at most this,
// not group.timeout, and holds back only the launcher's exit, never its loop; the next
// edit or SIGHUP tries again.
constexpr std::chrono::milliseconds kPublishTimeout{5000};

}  // namespace

std::string readConfigSnapshot(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw ConfigError("cannot read config file '" + path + "'");
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

ConfigWatch::ConfigWatch(std::string path, std::string text, std::vector<std::string> sets, std::string masterAddr,
                         int masterPort, int worldSize)
    : path_(std::move(path)),
      lastText_(std::move(text)),
      masterAddr_(std::move(masterAddr)),
      masterPort_(masterPort),
      worldSize_(worldSize) {
  overrides_.set = std::move(sets);
  group_ = load(lastText_).groupName();
  publisher_ = std::thread([this] { publishLoop(); });
}

ConfigWatch::~ConfigWatch() {
  {
    MutexLock lock(&mutex_);
    stop_ = true;
    pending_.reset();
  }
  wake_.signal();
  publisher_.join();
}

// As the ranks load an epoch's YAML (ProcessGroup::applyEpoch): text, not the file, so a
// relative plugin_path means the same here and there.
Config ConfigWatch::load(const std::string& text) { return loadConfigText(text, path_, registry_, overrides_); }

void ConfigWatch::changed(const std::string& why, bool force) {
  const std::string name = "commhost run: " + path_ + " (" + why + ")";
  std::string text;
  try {
    text = readConfigSnapshot(path_);
    // Editors write twice; a save with no change is none (unless it never got through).
    if (text == lastText_ && !force && !lastFailed_.load()) return;
    const Config config = load(text);
    if (config.groupName() != group_)
      throw ConfigError("group.name changed from '" + group_ + "' to '" + config.groupName() +
                        "'; a running job keeps its group's name");
    const PluginEntry& entry = registry_.require(config.store.plugin, PluginKind::Store);
    Publication p{
        text, name, config.store.plugin, entry.descriptor, entry.library, config.store.options, config.timeout()};
    lastText_ = text;
    lastFailed_ = false;
    {
      MutexLock lock(&mutex_);
      pending_ = std::move(p);
    }
    wake_.signal();
  } catch (const ConfigError& e) {
    lastText_ = text;  // reported once; the next edit is read again
    std::cerr << name << ": invalid, the job goes on with its current config:\n" << e.what() << std::endl;
  } catch (const std::exception& e) {
    std::cerr << name << ": not published (the job goes on with its current config): " << e.what() << std::endl;
  }
}

void ConfigWatch::publishLoop() {
  for (;;) {
    Publication p;
    {
      MutexLock lock(&mutex_);
      while (!stop_ && !pending_) wake_.wait(&mutex_);
      if (stop_) return;
      p = std::move(*pending_);
      pending_.reset();
    }
    publish(p);
  }
}

Store& ConfigWatch::store(const Publication& p) {
  if (store_) return *store_;
  // A client of the ranks' store: never the server (rank 0 hosts it with serve: auto),
  // and one that gives up after kPublishTimeout (ctx.timeout is for stores without a
  // timeout option of their own).
  const OptionValues options = clientStoreOptions(*p.storeDescriptor, p.storeOptions, kPublishTimeout);
  StoreContext ctx;
  ctx.rank = -1;
  ctx.worldSize = worldSize_;
  ctx.masterAddr = masterAddr_;
  ctx.masterPort = masterPort_;
  ctx.timeout = std::min(p.timeout, kPublishTimeout);
  ctx.logger = std::make_shared<Logger>("commhost." + p.storePlugin, "commhost run --watch");
  store_ = p.storeDescriptor->createStore(options, ctx);
  storeLibrary_ = p.storeLibrary;
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

void ConfigWatch::publish(const Publication& p) {
  try {
    Store& s = store(p);
    const uint64_t epoch = epoch_ + 1;
    const std::string prefix = group_ + "/pending/" + std::to_string(epoch) + "/";
    s.set(prefix + "source", toBytes(path_));
    s.set(prefix + "yaml", toBytes(p.text));
    s.set(group_ + "/pending/epoch", toBytes(std::to_string(epoch)));
    epoch_ = epoch;
    std::cerr << p.name << ": published as epoch " << epoch << "; every rank switches to it at the same syncPoint()"
              << std::endl;
  } catch (const std::exception& e) {
    store_.reset();  // reconnects next time (before its plugin's code may go)
    lastFailed_ = true;
    std::cerr << p.name
              << ": not published (the job goes on with its current config; save the file again or send "
                 "SIGHUP to retry): "
              << e.what() << std::endl;
  }
}

}  // namespace commhost::cli
