// SPDX-License-Identifier: Apache-2.0
// Elastic jobs under `commhost run`: with supervisor.on_peer_loss: shrink the job's store
// must outlive every rank, rank 0 included (the tcp store is otherwise served by rank 0's
// process, and the survivors of its loss could not agree on anything). Node 0's launcher
// then serves the tcp store in a process of its own (`commhost store serve`, in its own
// process group so that a Ctrl-C for the job does not take the store from the ranks still
// reporting), and every rank's tcp store connects only (serve: never). A store the config
// serves otherwise (serve: always / never, etcd, file) is left as it is.
#pragma once

#include <sys/types.h>

#include <string>

#include "commhost/config.h"
#include "launcher.h"

namespace commhost::cli {

class StoreKeeper {
 public:
  // Reads supervisor.on_peer_loss and the store from `cfg`: sets plan.keepGoing, and for
  // the tcp store with serve: auto adds "store.options.serve=never" to plan.overrides and,
  // on node 0, starts the server (`self` is this program). Throws on a failed start.
  StoreKeeper(const Config& cfg, LaunchPlan& plan, const std::string& self);
  ~StoreKeeper();  // stops the server (SIGTERM) and reaps it
  StoreKeeper(const StoreKeeper&) = delete;
  StoreKeeper& operator=(const StoreKeeper&) = delete;

 private:
  pid_t pid_ = -1;
};

}  // namespace commhost::cli
