// SPDX-License-Identifier: Apache-2.0
// `commhost run --watch CONFIG`: what the launcher does when the file changes (an edit
// that inotify reports, or SIGHUP). It loads the file as the ranks will (loadConfigText,
// the same --set overrides and environment) and, when valid, publishes it through the
// job's store as the world group's next epoch (keys in host/src/group/sync_point.cc);
// the ranks apply it at the same syncPoint(). An invalid file is reported with its
// config errors and nothing is published: the job goes on with its current config.
//
// Threading: the launcher's thread only.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "commhost/config.h"
#include "commhost/registry.h"
#include "commhost/store.h"

namespace commhost::cli {

class ConfigWatch {
 public:
  // `path`: the absolute config file the job started with, `text` what the ranks were
  // handed of it; `sets`: the ranks' --set overrides; the store is reached at
  // masterAddr:masterPort unless its options say.
  ConfigWatch(std::string path, std::string text, std::vector<std::string> sets, std::string masterAddr, int masterPort,
              int worldSize);
  // Re-reads the file and publishes it when valid; `why` names the trigger in the lines
  // printed. An edit that leaves the text as last published is ignored unless `force`
  // (SIGHUP: a reconfigure to the same config keeps every backend).
  void changed(const std::string& why, bool force);

 private:
  Config load(const std::string& text);
  Store& store(const Config& config);

  std::string path_;
  ConfigOverrides overrides_;
  std::string masterAddr_;
  int masterPort_;
  int worldSize_;
  std::string group_;     // group.name of the config the job started with
  std::string lastText_;  // the text published last (at first: the one the job started with)
  PluginRegistry registry_;
  std::shared_ptr<void> storeLibrary_;  // the store plugin's code, outliving store_
  StorePtr store_;  // connected at the first publication (the ranks serve it); dropped when one fails
  uint64_t epoch_ = 0;
};

}  // namespace commhost::cli
