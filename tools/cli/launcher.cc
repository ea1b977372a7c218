// SPDX-License-Identifier: Apache-2.0
// NOLINTBEGIN(concurrency-mt-unsafe): the launcher runs on one thread (it forks the ranks, then waits on
// them and on signals through a signalfd), and a forked child has one thread until it execs.
#include "launcher.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/inotify.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <stdexcept>
#include <system_error>

#include "reach_lines.h"

namespace commhost::cli {
namespace {

using Clock = std::chrono::steady_clock;

struct Rank {
  int globalRank = 0;
  pid_t pid = -1;
  int outFd = -1;       // the rank's stdout and stderr, merged
  std::string pending;  // a partial line not yet printed
  bool exited = false;
  int status = 0;  // waitpid status
  Clock::time_point start, end;
  // From the tcp store client's lines (plugins/tcp_store/reach_lines.h): a rank is
  // another process, so its lines are all the launcher sees of its StoreError.
  enum class StoreReach { Unknown, Waiting, Reached, GaveUp } store = StoreReach::Unknown;
};

void noteStoreLine(Rank& r, const std::string& line) {
  if (line.find(tcpstore::kStillWaitingLine) != std::string::npos) {
    if (r.store != Rank::StoreReach::GaveUp) r.store = Rank::StoreReach::Waiting;
  } else if (line.find(tcpstore::kReachedLine) != std::string::npos) {
    r.store = Rank::StoreReach::Reached;
  } else if (line.find(tcpstore::kGaveUpLine) != std::string::npos) {
    r.store = Rank::StoreReach::GaveUp;
  }
}

void flushLines(Rank& r, bool all) {
  size_t nl;
  while ((nl = r.pending.find('\n')) != std::string::npos) {
    noteStoreLine(r, r.pending.substr(0, nl));
    std::cout << "[" << r.globalRank << "] " << r.pending.substr(0, nl + 1);
    r.pending.erase(0, nl + 1);
  }
  if (all && !r.pending.empty()) {
    noteStoreLine(r, r.pending);
    std::cout << "[" << r.globalRank << "] " << r.pending << "\n";
    r.pending.clear();
  }
  std::cout.flush();
}

std::string describeStatus(int status) {
  if (WIFEXITED(status)) return "exit " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status))
    return std::string("signal ") + std::to_string(WTERMSIG(status)) + " (" + strsignal(WTERMSIG(status)) + ")";
  return "unknown";
}

int exitCodeOf(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

bool failed(int status) { return !WIFEXITED(status) || WEXITSTATUS(status) != 0; }

// Reads what the rank wrote since the last look and prints its complete lines; closes
// the pipe at end of file. Returns whether the rank wrote anything.
bool relay(Rank& r) {
  bool wrote = false;
  while (r.outFd >= 0) {
    char buf[65536];
    const ssize_t n = ::read(r.outFd, buf, sizeof buf);
    if (n > 0) {
      r.pending.append(buf, static_cast<size_t>(n));
      flushLines(r, false);
      wrote = true;
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return wrote;
    flushLines(r, true);
    ::close(r.outFd);
    r.outFd = -1;
  }
  return wrote;
}

// Signals the rank's process group (the rank and what it started), or the rank alone.
void signalRank(const Rank& r, int sig) {
  if (::kill(-r.pid, sig) != 0) ::kill(r.pid, sig);
}

pid_t spawn(const LaunchPlan& plan, Rank& rank, int localRank, int worldSize, const sigset_t& parentMask) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0)
    throw std::runtime_error(std::string("pipe: ") + std::generic_category().message(errno));
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error(std::string("fork: ") + std::generic_category().message(errno));
  if (pid == 0) {
    // Its own process group, so stopping a rank reaches the processes it started too.
    ::setpgid(0, 0);
    ::sigprocmask(SIG_SETMASK, &parentMask, nullptr);
    ::dup2(fds[1], STDOUT_FILENO);
    ::dup2(fds[1], STDERR_FILENO);
    auto set = [](const char* k, const std::string& v) { ::setenv(k, v.c_str(), 1); };
    set("RANK", std::to_string(rank.globalRank));
    set("WORLD_SIZE", std::to_string(worldSize));
    set("LOCAL_RANK", std::to_string(localRank));
    set("LOCAL_WORLD_SIZE", std::to_string(plan.localRanks));
    set("GROUP_RANK", std::to_string(plan.nodeRank));
    set("MASTER_ADDR", plan.masterAddr);
    set("MASTER_PORT", std::to_string(plan.masterPort));
    if (!plan.configPath.empty()) set("COMMHOST_CONFIG", plan.configPath);
    std::string overrides;
    for (const auto& o : plan.overrides) overrides += o + "\n";
    if (!overrides.empty()) set("COMMHOST_OVERRIDES", overrides);
    std::vector<char*> argv;
    for (const auto& a : plan.command) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execvp(argv[0], argv.data());
    std::fprintf(stderr, "commhost run: cannot start '%s' for rank %d: %s\n", argv[0], rank.globalRank,
                 std::strerror(errno));
    ::_exit(127);
  }
  ::setpgid(pid, pid);  // also here, so a signal sent right away finds the group
  ::close(fds[1]);
  ::fcntl(fds[0], F_SETFL, ::fcntl(fds[0], F_GETFL) | O_NONBLOCK);
  rank.outFd = fds[0];
  rank.start = Clock::now();
  return pid;
}

// inotify on the folder of plan.watchPath: editors often write a new file and rename it
// over the old one, which a watch on the file itself would lose after the first save.
struct Watch {
  int fd = -1;
  std::string name;  // the file's name in its folder
  explicit Watch(const std::string& path) {
    if (path.empty()) return;
    const std::filesystem::path p(path);
    name = p.filename().string();
    fd = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (fd < 0 || ::inotify_add_watch(fd, p.parent_path().c_str(), IN_CLOSE_WRITE | IN_MOVED_TO) < 0) {
      const int error = errno;
      if (fd >= 0) ::close(fd);
      throw std::runtime_error("cannot watch " + path + ": " + std::generic_category().message(error));
    }
  }
  ~Watch() {
    if (fd >= 0) ::close(fd);
  }
  Watch(const Watch&) = delete;
  Watch& operator=(const Watch&) = delete;
  // Whether the events read since the last call touched the file.
  bool touched() const {
    bool hit = false;
    alignas(inotify_event) char buf[8192];
    ssize_t n;
    while ((n = ::read(fd, buf, sizeof buf)) > 0)
      for (ssize_t at = 0; at < n;) {
        const auto* e = reinterpret_cast<const inotify_event*>(buf + at);
        if (e->len > 0 && name == e->name) hit = true;
        at += static_cast<ssize_t>(sizeof(inotify_event) + e->len);
      }
    return hit;
  }
};

}  // namespace

int pickFreePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  const bool ok = fd >= 0 && ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
  const int error = errno;
  if (fd >= 0) ::close(fd);
  if (!ok) throw std::runtime_error(std::string("cannot find a free port: ") + std::generic_category().message(error));
  return ntohs(addr.sin_port);
}

int launch(const LaunchPlan& plan) {
  const int worldSize = plan.localRanks * plan.nodes;
  // SIGCHLD, SIGINT and SIGTERM arrive through a signalfd, read in the poll loop.
  sigset_t handled, parentMask;
  sigemptyset(&handled);
  sigaddset(&handled, SIGCHLD);
  sigaddset(&handled, SIGINT);
  sigaddset(&handled, SIGTERM);
  const bool watching = !plan.watchPath.empty() && plan.onConfigChange;
  if (watching) sigaddset(&handled, SIGHUP);
  const Watch watch(watching ? plan.watchPath : "");
  ::sigprocmask(SIG_BLOCK, &handled, &parentMask);
  const int sigFd = ::signalfd(-1, &handled, SFD_CLOEXEC | SFD_NONBLOCK);
  if (sigFd < 0) {
    ::sigprocmask(SIG_SETMASK, &parentMask, nullptr);
    throw std::runtime_error(std::string("signalfd: ") + std::generic_category().message(errno));
  }

  std::vector<Rank> ranks(plan.localRanks);
  int firstFailure = -1;  // index into ranks
  std::string stopReason;
  Clock::time_point termAt{}, killAt{};
  bool stopping = false, termed = false, killed = false;
  int stopSignal = 0;  // the signal that stopped the launcher, if any
  auto sendTerm = [&] {
    termed = true;
    for (auto& r : ranks)
      if (!r.exited && r.pid > 0) signalRank(r, SIGTERM);
    killAt = Clock::now() + plan.grace;
  };
  // After a rank fails, the others usually fail at the same moment (a hang detected by
  // every watchdog): they get `settle` to exit and report by themselves before SIGTERM.
  // A survivor still writing is reporting (its error, its dump): each line it writes
  // renews the settle time, to at least reportWait (a supervisor waits up to a second
  // for its peers' dumps before its verdict), up to the longer of 4 x settle and 5 s in
  // all, so the survivors' own account of the failure comes out before they are stopped.
  const std::chrono::milliseconds reportWait = std::max(plan.settle, std::chrono::milliseconds(2000));
  Clock::time_point settleLimit{};
  auto stopAll = [&](const std::string& why, std::chrono::milliseconds settle) {
    if (stopping) return;
    stopping = true;
    stopReason = why;
    termAt = Clock::now() + settle;
    settleLimit = Clock::now() + std::max(4 * settle, std::chrono::milliseconds(5000));
    if (settle.count() <= 0) sendTerm();
  };

  int running = 0;
  for (int i = 0; i < plan.localRanks; ++i) {
    ranks[i].globalRank = plan.nodeRank * plan.localRanks + i;
    try {
      ranks[i].pid = spawn(plan, ranks[i], i, worldSize, parentMask);
      ++running;
    } catch (const std::exception& e) {
      for (int j = i; j < plan.localRanks; ++j) ranks[j].exited = true;
      stopAll(std::string("cannot start rank ") + std::to_string(ranks[i].globalRank) + ": " + e.what(),
              std::chrono::milliseconds(0));
      break;
    }
  }
  while (running > 0) {
    std::vector<pollfd> fds;
    fds.push_back({sigFd, POLLIN, 0});
    if (watch.fd >= 0 && !stopping) fds.push_back({watch.fd, POLLIN, 0});
    for (auto& r : ranks)
      if (r.outFd >= 0) fds.push_back({r.outFd, POLLIN, 0});
    int timeoutMs = -1;
    if (stopping && !killed)
      timeoutMs = std::max<int>(0, static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                                        (termed ? killAt : termAt) - Clock::now())
                                                        .count()));
    ::poll(fds.data(), fds.size(), timeoutMs);

    for (auto& r : ranks)
      if (relay(r) && stopping && !termed) termAt = std::max(termAt, std::min(settleLimit, Clock::now() + reportWait));
    if (watch.fd >= 0 && watch.touched() && !stopping) plan.onConfigChange("edited");
    signalfd_siginfo info;
    while (::read(sigFd, &info, sizeof info) == sizeof info) {
      if (info.ssi_signo == SIGHUP) {
        if (!stopping) plan.onConfigChange("SIGHUP");
        continue;
      }
      if (info.ssi_signo == SIGINT || info.ssi_signo == SIGTERM) {
        if (!stopping) stopSignal = static_cast<int>(info.ssi_signo);
        stopAll(std::string("the launcher got ") + strsignal(static_cast<int>(info.ssi_signo)),
                std::chrono::milliseconds(0));
        if (!termed) sendTerm();  // a second Ctrl-C during the settle time
      }
    }
    int status = 0;
    pid_t pid;
    while ((pid = ::waitpid(-1, &status, WNOHANG)) > 0) {
      for (size_t i = 0; i < ranks.size(); ++i) {
        Rank& r = ranks[i];
        if (r.pid != pid) continue;
        r.exited = true;
        r.status = status;
        r.end = Clock::now();
        --running;
        if (failed(status) && firstFailure < 0 && !stopping) {
          firstFailure = static_cast<int>(i);
          stopAll("rank " + std::to_string(r.globalRank) + " failed (" + describeStatus(status) + ")", plan.settle);
        }
      }
    }
    if (stopping && !termed && Clock::now() >= termAt) sendTerm();
    if (stopping && termed && !killed && Clock::now() >= killAt) {
      killed = true;  // once; then wait for the exits without a timeout
      for (auto& r : ranks)
        if (!r.exited && r.pid > 0) signalRank(r, SIGKILL);
    }
  }
  // Exited ranks may have left output in their pipes (or children that still hold them).
  for (auto& r : ranks) {
    relay(r);
    if (r.outFd >= 0) {
      flushLines(r, true);
      ::close(r.outFd);
    }
  }
  ::close(sigFd);
  ::sigprocmask(SIG_SETMASK, &parentMask, nullptr);

  if (!stopping) return 0;
  std::cerr << "commhost run: stopped the job: " << stopReason << "\n"
            << "  rank    pid  status                     time(s)\n";
  for (size_t i = 0; i < ranks.size(); ++i) {
    const Rank& r = ranks[i];
    char line[160];
    std::snprintf(line, sizeof line, "  %4d %6d  %-26s %7.2f%s\n", r.globalRank, r.pid,
                  describeStatus(r.status).c_str(), std::chrono::duration<double>(r.end - r.start).count(),
                  static_cast<int>(i) == firstFailure ? "  <- failed first" : "");
    std::cerr << line;
  }
  std::string unreached;
  for (const Rank& r : ranks)
    if (r.store == Rank::StoreReach::Waiting || r.store == Rank::StoreReach::GaveUp)
      unreached += (unreached.empty() ? "" : ", ") + std::to_string(r.globalRank);
  if (!unreached.empty())
    std::cerr << "  ranks that never reached the store: " << unreached
              << " (their 'store at host:port' lines above say where they looked; check that rank 0 or `commhost "
                 "store serve` runs there and MASTER_ADDR/MASTER_PORT)\n";
  if (firstFailure >= 0) return exitCodeOf(ranks[firstFailure].status);
  return stopSignal ? 128 + stopSignal : 1;  // as a shell reports a signal (130 for Ctrl-C)
}

}  // namespace commhost::cli
// NOLINTEND(concurrency-mt-unsafe)
