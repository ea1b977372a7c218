// SPDX-License-Identifier: Apache-2.0
// torch's own TCPStore server, in a /usr/bin/python3 child (Debian's torch: 1.13 on
// Debian 12, 2.6 on Debian 13), on a free loopback port; killed by the destructor, or
// with the test binary (PR_SET_PDEATHSIG). Tests skip (GTEST_SKIP with missingReason())
// where that python cannot import torch.distributed.
#pragma once

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

namespace commhost::test {

class TorchStoreServer {
 public:
  static constexpr const char* kPython = "/usr/bin/python3";

  static std::string missingReason() {
    static const std::string reason = [] {
      const std::string probe = std::string(kPython) + " -c 'import torch.distributed' >/dev/null 2>&1";
      return std::system(probe.c_str()) == 0
                 ? std::string()
                 : std::string(kPython) + " cannot import torch.distributed (python3-torch)";
    }();
    return reason;
  }

  // With `seedVersion`, torch's own client sets the key "torch_version" to torch.__version__
  // before the server is handed over (otherwise the server starts empty).
  explicit TorchStoreServer(bool seedVersion = false) {
    // torch 2.x serves with libuv by default, which Debian's build lacks; 1.x has no such flag.
    const std::string script = std::string(
                                   "import datetime, time, torch, torch.distributed as d\n"
                                   "kw = {} if torch.__version__.startswith('1.') else {'use_libuv': False}\n"
                                   "s = d.TCPStore('127.0.0.1', 0, 1, True, timeout=datetime.timedelta(seconds=120), "
                                   "wait_for_workers=False, **kw)\n") +
                               (seedVersion ? "s.set('torch_version', torch.__version__)\n" : "") +
                               "print(s.port, flush=True)\n"
                               "while True: time.sleep(3600)\n";  // serves until killed
    int out[2];
    if (::pipe(out) != 0) throw std::runtime_error("pipe failed");
    pid_ = ::fork();
    if (pid_ < 0) throw std::runtime_error("cannot fork python3");
    if (pid_ == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      ::dup2(out[1], 1);
      ::close(out[0]);
      ::execl(kPython, kPython, "-c", script.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    ::close(out[1]);
    FILE* in = ::fdopen(out[0], "r");
    char line[64] = {};
    const bool got = in && std::fgets(line, sizeof line, in);
    if (in) std::fclose(in);
    port_ = got ? std::atoi(line) : 0;
    if (port_ <= 0) {
      stop();
      throw std::runtime_error("torch's TCPStore server did not start (python3 printed no port)");
    }
  }
  ~TorchStoreServer() { stop(); }
  TorchStoreServer(const TorchStoreServer&) = delete;
  TorchStoreServer& operator=(const TorchStoreServer&) = delete;

  int port() const { return port_; }

 private:
  void stop() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  pid_t pid_ = -1;
  int port_ = 0;
};

}  // namespace commhost::test
