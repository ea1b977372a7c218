// SPDX-License-Identifier: Apache-2.0
// idle_rank SECONDS: joins the job from the environment (commhost::init), issues nothing
// and leaves after SECONDS. What the store then serves is the supervisor's own traffic
// (heartbeats, progress, incident checks): store_load.sh runs N of these to size it.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "commhost/commhost.h"

int main(int argc, char** argv) {
  const double seconds = argc > 1 ? std::atof(argv[1]) : 10;
  try {
    auto pg = commhost::init();
    std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
    pg->shutdown();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "idle_rank: %s\n", e.what());
    return 1;
  }
  return 0;
}
