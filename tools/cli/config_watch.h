// SPDX-License-Identifier: Apache-2.0
// `commhost run --watch CONFIG`: what the launcher does when the file changes (an edit
// that inotify reports, or SIGHUP). It loads the file as the ranks will (loadConfigText,
// the same --set overrides and environment) and, when valid, publishes it through the
// job's store as the world group's next epoch (keys in host/src/group/sync_point.cc);
// the ranks apply it at the same syncPoint(). An invalid file is reported with its
// config errors and nothing is published: the job goes on with its current config.
//
// Threading: changed() runs on the launcher's thread, which also owns the file, the
// registry and the last text; the publication (store connection and writes, which can
// wait up to kPublishTimeout on a store host that is stopped) runs on a thread of this
// object's own, so the launcher's loop keeps forwarding signals and watching ranks
// meanwhile. They share only the pending publication and the failure flag (mutex_).
#pragma once

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "commhost/config.h"
#include "commhost/mutex.h"
#include "commhost/registry.h"
#include "commhost/store.h"

namespace commhost::cli {

// The config file's text, read once; ConfigError when it cannot be read. What every rank
// starts on (LaunchPlan::configText) and what each edit is compared with.
std::string readConfigSnapshot(const std::string& path);

class ConfigWatch {
 public:
  // `path`: the absolute config file the job started with, `text` what the ranks were
  // handed of it; `sets`: the ranks' --set overrides; the store is reached at
  // masterAddr:masterPort unless its options say.
  ConfigWatch(std::string path, std::string text, std::vector<std::string> sets, std::string masterAddr, int masterPort,
              int worldSize);
  // Waits for a publication in progress (at most the publish timeout; the job's ranks,
  // and so its store, are gone by then, which ends it sooner).
  ~ConfigWatch();
  ConfigWatch(const ConfigWatch&) = delete;
  ConfigWatch& operator=(const ConfigWatch&) = delete;

  // Re-reads the file and, when valid, hands it to the publisher (a later one replaces a
  // publication not started yet); `why` names the trigger in the lines printed. An edit
  // that leaves the text as last handed over is ignored unless `force` (SIGHUP: a
  // reconfigure to the same config keeps every backend) or its publication failed.
  void changed(const std::string& why, bool force);

 private:
  // One publication, with everything the publisher needs: it never reads the registry.
  struct Publication {
    std::string text, name;  // the YAML; "commhost run: PATH (why)" for the lines printed
    std::string storePlugin;
    const PluginDescriptor* storeDescriptor = nullptr;
    std::shared_ptr<void> storeLibrary;  // keeps the store plugin's code loaded
    OptionValues storeOptions;
    std::chrono::milliseconds timeout{0};
  };
  Config load(const std::string& text);
  void publishLoop();
  void publish(const Publication& p);
  Store& store(const Publication& p);

  // The launcher's thread only.
  std::string path_;
  ConfigOverrides overrides_;
  std::string group_;     // group.name of the config the job started with (const after construction)
  std::string lastText_;  // the text handed over last (at first: the one the job started with)
  PluginRegistry registry_;
  // The publisher's thread only.
  std::string masterAddr_;
  int masterPort_;
  int worldSize_;
  std::shared_ptr<void> storeLibrary_;  // the store plugin's code, outliving store_
  StorePtr store_;  // connected at the first publication (the ranks serve it); dropped when one fails
  uint64_t epoch_ = 0;
  // Shared.
  Mutex mutex_;
  CondVar wake_;
  std::optional<Publication> pending_ GUARDED_BY(mutex_);
  bool stop_ GUARDED_BY(mutex_) = false;
  std::atomic<bool> lastFailed_{false};  // the last publication did not reach the store: retry on the next save
  std::thread publisher_;                // last: started once the members it reads exist
};

}  // namespace commhost::cli
