// SPDX-License-Identifier: Apache-2.0
#include "plugin_probe.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <thread>

#include "commhost/errors.h"
#include "commhost/registry.h"

namespace commhost::cli {

std::string probeInChild(const std::string& path, std::chrono::milliseconds limit) {
  const pid_t pid = ::fork();
  if (pid < 0) return "";
  if (pid == 0) {
    // The child only loads: whether the plugin is usable is the parent's to find out, and
    // _exit skips the plugin's static destructors and our atexit handlers alike.
    try {
      PluginRegistry registry;
      registry.loadFile(path);
    } catch (...) {
    }
    ::_exit(0);
  }
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + limit;
  int status = 0;
  for (auto pause = std::chrono::microseconds(200);; pause = std::min(pause * 2, std::chrono::microseconds(20000))) {
    const pid_t done = ::waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    if (done < 0) return "";
    if (Clock::now() >= deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return "hung while loading (a child process that loaded it was still inside dlopen after " +
             formatDuration(limit) + "; a static initializer may wait forever); not loaded";
    }
    std::this_thread::sleep_for(pause);
  }
  if (WIFSIGNALED(status))
    return std::string("crashed the process loading it (signal ") + std::to_string(WTERMSIG(status)) + ", " +
           ::strsignal(WTERMSIG(status)) +
           ", in a child process: a static initializer or what its descriptor points at); not loaded";
  if (WIFEXITED(status) && WEXITSTATUS(status) != 0)
    return "ended the process loading it (exit status " + std::to_string(WEXITSTATUS(status)) +
           ", in a child process: a static initializer called exit()); not loaded";
  return "";
}

}  // namespace commhost::cli
