// SPDX-License-Identifier: Apache-2.0
// NOLINTBEGIN(concurrency-mt-unsafe): the launcher's loop runs on one thread (it forks the ranks, then waits
// on them and on signals through a signalfd). Other threads may exist in the process: a plugin's probe,
// run while the config is checked, may start some (the CUDA driver does, behind the nccl plugin's). So the
// child prepares nothing between fork and exec (see ChildPlan), and signals that land on another
// thread are forwarded to the loop's (see LoopSignals).
#include "launcher.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/inotify.h>
#include <sys/prctl.h>
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

#include "launch_reports.h"

extern char** environ;  // the launcher's environment, copied into each rank's (unistd.h with _GNU_SOURCE)

namespace commhost::cli {
namespace {

using Clock = std::chrono::steady_clock;

struct Rank {
  int globalRank = 0;
  pid_t pid = -1;
  int outFd = -1;       // the rank's stdout and stderr, merged
  int reportFd = -1;    // the launcher's end of the rank's report channel (launch_reports.h)
  std::string pending;  // a partial line not yet printed
  bool exited = false;
  int status = 0;  // waitpid status
  Clock::time_point start, end;
  RankReports reports;  // what the rank reported: the store reached, joined, why it failed
  int restarts = 0;     // times this rank was started again (--max-restarts)
};

void flushLines(Rank& r, bool all) {
  size_t nl;
  while ((nl = r.pending.find('\n')) != std::string::npos) {
    std::cout << "[" << r.globalRank << "] " << r.pending.substr(0, nl + 1);
    r.pending.erase(0, nl + 1);
  }
  if (all && !r.pending.empty()) {
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

// "exit 1: [PeerLost] ...": the status, and the rank's own account when it sent one.
std::string describeFailure(const Rank& r) {
  const std::string why = r.reports.failureLine();
  return describeStatus(r.status) + (why.empty() ? "" : ": " + why);
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

// Everything a rank's child process needs, built before fork. After fork in a process with
// other threads, the child may only make async-signal-safe calls until it execs (another
// thread may have held malloc's lock at the fork): no setenv, no strings, no iostreams.
struct ChildPlan {
  std::string path;                    // the program, resolved through PATH here
  std::vector<std::string> args, env;  // env: this process's, with the launch variables set
  std::string failure;                 // "commhost run: cannot start '<prog>' for rank <r>: "
  std::vector<char*> argv, envp;       // into args and env, null-terminated
};

// The first PATH entry holding an executable `program`; `program` itself when it has a
// '/' or none does (execve then fails, and the child says why).
std::string resolveProgram(const std::string& program) {
  if (program.find('/') != std::string::npos) return program;
  const char* path = ::getenv("PATH");  // the lookup execvp does (not a commhost setting), before fork
  std::string dirs = path ? path : "/usr/local/bin:/usr/bin:/bin";
  for (size_t at = 0; at <= dirs.size();) {
    size_t end = dirs.find(':', at);
    if (end == std::string::npos) end = dirs.size();
    const std::string dir = end > at ? dirs.substr(at, end - at) : ".";
    const std::string candidate = dir + "/" + program;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
    at = end + 1;
  }
  return program;
}

ChildPlan childPlan(const LaunchPlan& plan, const Rank& rank, int localRank, int worldSize, int reportFd) {
  ChildPlan c;
  std::vector<std::pair<std::string, std::string>> vars = {
      {"RANK", std::to_string(rank.globalRank)},        {"WORLD_SIZE", std::to_string(worldSize)},
      {"LOCAL_RANK", std::to_string(localRank)},        {"LOCAL_WORLD_SIZE", std::to_string(plan.localRanks)},
      {"GROUP_RANK", std::to_string(plan.nodeRank)},    {"MASTER_ADDR", plan.masterAddr},
      {"MASTER_PORT", std::to_string(plan.masterPort)}, {"COMMHOST_LAUNCH_REPORT_FD", std::to_string(reportFd)},
  };
  if (!plan.configPath.empty()) vars.emplace_back("COMMHOST_CONFIG", plan.configPath);
  constexpr size_t kMaxEnvText = 64 * 1024;  // Linux refuses a single variable over 128 KiB
  if (!plan.configPath.empty() && !plan.configText.empty() && plan.configText.size() <= kMaxEnvText)
    vars.emplace_back("COMMHOST_CONFIG_TEXT", plan.configText);
  std::string overrides;
  for (const auto& o : plan.overrides) overrides += o + "\n";
  // A restarted rank joins the running job (the others admit it at a sync point).
  if (rank.restarts > 0) overrides += "group.join=true\n";
  if (!overrides.empty()) vars.emplace_back("COMMHOST_OVERRIDES", overrides);
  bool ompSet = false;
  for (char** e = environ; e && *e; ++e) {
    const std::string entry = *e;
    const std::string key = entry.substr(0, entry.find('='));
    ompSet = ompSet || key == "OMP_NUM_THREADS";
    if (std::none_of(vars.begin(), vars.end(), [&](const auto& v) { return v.first == key; })) c.env.push_back(entry);
  }
  // As torchrun: ranks sharing a host get one OpenMP thread each unless the user chose,
  // so N ranks' intra-op pools do not oversubscribe the host's cores N times over.
  if (plan.localRanks > 1 && !ompSet) vars.emplace_back("OMP_NUM_THREADS", "1");
  for (const auto& [k, v] : vars) c.env.push_back(k + "=" + v);
  c.args = plan.command;
  c.path = resolveProgram(c.args.at(0));
  c.failure = "commhost run: cannot start '" + c.args[0] + "' for rank " + std::to_string(rank.globalRank) + ": ";
  for (auto& a : c.args) c.argv.push_back(a.data());
  c.argv.push_back(nullptr);
  for (auto& e : c.env) c.envp.push_back(e.data());
  c.envp.push_back(nullptr);
  return c;
}

void writeAll(int fd, const char* text) { (void)!::write(fd, text, std::strlen(text)); }

pid_t spawn(const LaunchPlan& plan, Rank& rank, int localRank, int worldSize, const sigset_t& parentMask,
            const sigset_t& handled) {
  const ReportChannel channel = ReportChannel::open();
  ChildPlan child = childPlan(plan, rank, localRank, worldSize, channel.theirs);
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    const int error = errno;
    ::close(channel.mine);
    ::close(channel.theirs);
    throw std::runtime_error(std::string("pipe: ") + std::generic_category().message(error));
  }
  const pid_t launcher = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int error = errno;
    for (int fd : {fds[0], fds[1], channel.mine, channel.theirs}) ::close(fd);
    throw std::runtime_error(std::string("fork: ") + std::generic_category().message(error));
  }
  if (pid == 0) {
    // A rank dies with its launcher: a launcher killed in a way its loop never sees
    // (SIGKILL, an OOM kill) must not leave the job running. The signal follows the thread
    // that forked, launch()'s, which lives as long as the launcher. The launcher may have
    // died before the prctl: then this process already has another parent.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != launcher) ::_exit(128 + SIGKILL);
    // Its own process group, so stopping a rank reaches the processes it started too.
    ::setpgid(0, 0);
    // The launcher's forwarding handlers go before the mask is lifted (exec would reset
    // them, but a signal could arrive first).
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    for (int sig = 1; sig < NSIG; ++sig)
      if (sigismember(&handled, sig) == 1) ::sigaction(sig, &dfl, nullptr);
    ::sigprocmask(SIG_SETMASK, &parentMask, nullptr);
    ::dup2(fds[1], STDOUT_FILENO);
    ::dup2(fds[1], STDERR_FILENO);
    ::fcntl(channel.theirs, F_SETFD, 0);  // the report channel's end goes through exec
    ::execve(child.path.c_str(), child.argv.data(), child.envp.data());
    const int error = errno;
    writeAll(STDERR_FILENO, child.failure.c_str());
    writeAll(STDERR_FILENO, std::strerror(error));
    writeAll(STDERR_FILENO, "\n");
    ::_exit(127);
  }
  ::setpgid(pid, pid);  // also here, so a signal sent right away finds the group
  ::close(fds[1]);
  ::close(channel.theirs);
  ::fcntl(fds[0], F_SETFL, ::fcntl(fds[0], F_GETFL) | O_NONBLOCK);
  rank.outFd = fds[0];
  if (rank.reportFd >= 0) ::close(rank.reportFd);  // a restarted rank's last process's
  rank.reportFd = channel.mine;
  rank.start = Clock::now();
  return pid;
}

// The launcher's signals (SIGCHLD, SIGINT, SIGTERM, SIGHUP and SIGUSR1) reach the loop
// through a signalfd, which sees only signals that every thread blocks, or that are sent
// to the loop's thread. This one blocks them on the loop's thread, but a thread started
// earlier (a plugin probe's: the CUDA driver's) keeps them unblocked, and the kernel hands
// a process-wide signal to such a thread: SIGCHLD was lost there (seen on an H200 machine:
// `commhost run` waited forever for a rank that had exited, 2 runs in 5), and SIGINT would
// end the launcher without stopping its ranks. So each handled signal also gets a handler
// that, on any other thread, sends it on to the loop's thread, where the signalfd reads it.
pthread_t gLoopThread;  // set before the handlers are installed; read by them

void forwardToLoop(int sig) {
  const int saved = errno;
  if (!pthread_equal(pthread_self(), gLoopThread)) ::pthread_kill(gLoopThread, sig);
  errno = saved;
}

class LoopSignals {
 public:
  explicit LoopSignals(const sigset_t& handled) : handled_(handled) {
    ::sigprocmask(SIG_BLOCK, &handled_, &parentMask_);
    gLoopThread = pthread_self();
    struct sigaction forward {};
    forward.sa_handler = forwardToLoop;
    sigemptyset(&forward.sa_mask);
    forward.sa_flags = SA_RESTART;
    for (int sig = 1; sig < NSIG; ++sig)
      if (sigismember(&handled_, sig) == 1) ::sigaction(sig, &forward, &previous_[sig]);
    fd_ = ::signalfd(-1, &handled_, SFD_CLOEXEC | SFD_NONBLOCK);
    if (fd_ < 0) {
      const int error = errno;
      restore();
      throw std::runtime_error(std::string("signalfd: ") + std::generic_category().message(error));
    }
  }
  ~LoopSignals() {
    ::close(fd_);
    restore();
  }
  LoopSignals(const LoopSignals&) = delete;
  LoopSignals& operator=(const LoopSignals&) = delete;
  int fd() const { return fd_; }
  const sigset_t& parentMask() const { return parentMask_; }
  const sigset_t& handled() const { return handled_; }

 private:
  void restore() {
    for (int sig = 1; sig < NSIG; ++sig)
      if (sigismember(&handled_, sig) == 1) ::sigaction(sig, &previous_[sig], nullptr);
    ::sigprocmask(SIG_SETMASK, &parentMask_, nullptr);
  }
  sigset_t handled_, parentMask_;
  struct sigaction previous_[NSIG] = {};
  int fd_ = -1;
};

// The loop also reaps on a timer, so a lost SIGCHLD (whatever the cause) costs at most this.
constexpr int kReapSweepMs = 1000;

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

namespace {

// The signals the launcher takes through its signalfd: SIGCHLD, SIGINT, SIGTERM, SIGUSR1,
// and SIGHUP: a reload with --watch; otherwise it stops the job as SIGTERM does (the
// ranks are in process groups of their own, so a closed terminal's SIGHUP reaches only
// here), unless it was ignored when the launcher started (nohup): then it stays ignored.
// SIGUSR1 goes on to every rank: each supervisor dumps its flight recorder, whatever the
// job's store (a torch job's is torch's, which `commhost trace dump` cannot talk to).
// Read as the program starts, before any plugin loads: a library a plugin pulls in may
// install a SIGHUP handler of its own when it is loaded (UCX's libucs, which Debian 13's
// Gloo links, takes SIGHUP as its debug signal), which would hide that the launcher was
// started under nohup.
const bool gHupIgnoredAtStart = [] {
  struct sigaction hup {};
  return ::sigaction(SIGHUP, nullptr, &hup) == 0 && hup.sa_handler == SIG_IGN;
}();

sigset_t handledSignals(bool watching) {
  sigset_t handled;
  sigemptyset(&handled);
  for (int s : {SIGCHLD, SIGINT, SIGTERM, SIGUSR1}) sigaddset(&handled, s);
  if (watching || !gHupIgnoredAtStart) sigaddset(&handled, SIGHUP);
  else ::signal(SIGHUP, SIG_IGN);  // ignored again if a library took it since; the ranks inherit it
  return handled;
}

// One job on this node: its ranks and the stop sequence (settle, SIGTERM, SIGKILL), driven
// by launch()'s poll loop. The launcher's thread only.
class Job {
 public:
  Job(const LaunchPlan& plan, const LoopSignals& signals)
      : plan_(plan),
        signals_(signals),
        ranks_(plan.localRanks),
        reportWait_(std::max(plan.settle, std::chrono::milliseconds(2000))) {}

  // Starts every rank; one that cannot start stops the job. True when all started.
  bool start() {
    const int worldSize = plan_.localRanks * plan_.nodes;
    for (int i = 0; i < plan_.localRanks; ++i) {
      ranks_[i].globalRank = plan_.nodeRank * plan_.localRanks + i;
      try {
        ranks_[i].pid = spawn(plan_, ranks_[i], i, worldSize, signals_.parentMask(), signals_.handled());
        ++running_;
      } catch (const std::exception& e) {
        for (int j = i; j < plan_.localRanks; ++j) ranks_[j].exited = true;
        stopAll(std::string("cannot start rank ") + std::to_string(ranks_[i].globalRank) + ": " + e.what(),
                std::chrono::milliseconds(0));
        return false;
      }
    }
    return true;
  }
  bool running() const { return running_ > 0; }
  bool stopping() const { return stopping_; }

  // Waits for output, a signal or the next step of the stop sequence (at most a reap sweep).
  void poll(const Watch& watch) {
    std::vector<pollfd> fds;
    fds.push_back({signals_.fd(), POLLIN, 0});
    if (watch.fd >= 0 && !stopping_) fds.push_back({watch.fd, POLLIN, 0});
    for (auto& r : ranks_) {
      if (r.outFd >= 0) fds.push_back({r.outFd, POLLIN, 0});
      if (r.reportFd >= 0) fds.push_back({r.reportFd, POLLIN, 0});
    }
    int timeoutMs = kReapSweepMs;
    if (stopping_ && !killed_)
      timeoutMs = std::clamp<int>(static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                                       (termed_ ? killAt_ : termAt_) - Clock::now())
                                                       .count()),
                                  0, kReapSweepMs);
    ::poll(fds.data(), fds.size(), timeoutMs);
    for (auto& r : ranks_) r.reports.readFrom(r.reportFd);
    // A survivor still writing while the job stops is reporting: its settle time is renewed.
    for (auto& r : ranks_)
      if (relay(r) && stopping_ && !termed_)
        termAt_ = std::max(termAt_, std::min(settleLimit_, Clock::now() + reportWait_));
  }

  // Reads the signals that arrived: SIGUSR1 is forwarded, SIGHUP reloads when watching,
  // SIGINT, SIGTERM and (otherwise) SIGHUP stop the job.
  void readSignals(bool watching) {
    signalfd_siginfo info;
    while (::read(signals_.fd(), &info, sizeof info) == sizeof info) {
      if (info.ssi_signo == SIGUSR1) {
        // The rank alone, not its process group: SIGUSR1 ends a process that does not
        // handle it, and what a rank started (data loader workers) does not.
        for (auto& r : ranks_)
          if (!r.exited && r.pid > 0) ::kill(r.pid, SIGUSR1);
        continue;
      }
      if (info.ssi_signo == SIGHUP && watching) {
        if (!stopping_) plan_.onConfigChange("SIGHUP");
        continue;
      }
      if (info.ssi_signo == SIGINT || info.ssi_signo == SIGTERM || info.ssi_signo == SIGHUP) {
        if (!stopping_) stopSignal_ = static_cast<int>(info.ssi_signo);
        stopAll(std::string("the launcher got ") + strsignal(static_cast<int>(info.ssi_signo)),
                std::chrono::milliseconds(0));
        if (!termed_) sendTerm();  // a second Ctrl-C during the settle time
      }
    }
  }

  // Collects exited ranks; the first failure starts the stop sequence.
  void reap() {
    int status = 0;
    pid_t pid;
    while ((pid = ::waitpid(-1, &status, WNOHANG)) > 0) {
      for (size_t i = 0; i < ranks_.size(); ++i) {
        Rank& r = ranks_[i];
        if (r.pid != pid) continue;
        r.exited = true;
        r.status = status;
        r.end = Clock::now();
        r.reports.readFrom(r.reportFd);  // what it sent before it exited
        --running_;
        if (failed(status) && plan_.keepGoing && !stopping_) {
          if (r.restarts < plan_.maxRestarts && running_ > 0) {
            restart(i);
            continue;
          }
          if (firstFailure_ < 0) firstFailure_ = static_cast<int>(i);
          std::cerr << "commhost run: rank " << r.globalRank << " failed (" << describeFailure(r) << "); " << running_
                    << " rank(s) of this node go on without it (supervisor.on_peer_loss: shrink)" << std::endl;
        } else if (failed(status) && firstFailure_ < 0 && !stopping_) {
          firstFailure_ = static_cast<int>(i);
          stopAll("rank " + std::to_string(r.globalRank) + " failed (" + describeFailure(r) + ")", plan_.settle);
        }
      }
    }
  }

  // The stop sequence's next step when its time has come: SIGTERM after the settle time,
  // SIGKILL (once) after the grace.
  void escalate() {
    if (stopping_ && !termed_ && Clock::now() >= termAt_) sendTerm();
    if (stopping_ && termed_ && !killed_ && Clock::now() >= killAt_) {
      killed_ = true;  // once; then wait for the exits without a timeout
      for (auto& r : ranks_)
        if (!r.exited && r.pid > 0) signalRank(r, SIGKILL);
    }
  }

  // Exited ranks may have left output in their pipes (or children that still hold them).
  void drainOutput() {
    for (auto& r : ranks_) {
      relay(r);
      if (r.outFd >= 0) {
        flushLines(r, true);
        ::close(r.outFd);
      }
    }
  }

  // The summary of a stopped job (to stderr) and the launcher's exit status.
  int finish() const {
    const bool restarted = std::any_of(ranks_.begin(), ranks_.end(), [](const Rank& r) { return r.restarts > 0; });
    if (!stopping_ && (firstFailure_ >= 0 || restarted)) return finishShrunk();
    if (!stopping_) return 0;
    std::cerr << "commhost run: stopped the job: " << stopReason_ << "\n"
              << "  rank    pid  status                     time(s)\n";
    for (size_t i = 0; i < ranks_.size(); ++i) {
      const Rank& r = ranks_[i];
      char line[160];
      std::snprintf(line, sizeof line, "  %4d %6d  %-26s %7.2f%s\n", r.globalRank, r.pid,
                    describeStatus(r.status).c_str(), std::chrono::duration<double>(r.end - r.start).count(),
                    static_cast<int>(i) == firstFailure_ ? "  <- failed first" : "");
      std::cerr << line;
    }
    printReports();
    if (firstFailure_ >= 0) return exitCodeOf(ranks_[firstFailure_].status);
    return stopSignal_ ? 128 + stopSignal_ : 1;  // as a shell reports a signal (130 for Ctrl-C)
  }

 private:
  // --max-restarts: a new process for the rank that failed; it joins the running job.
  void restart(size_t i) {
    Rank& r = ranks_[i];
    relay(r);  // what the dead process wrote; a pipe a child of it still holds is let go
    if (r.outFd >= 0) {
      flushLines(r, true);
      ::close(r.outFd);
      r.outFd = -1;
    }
    ++r.restarts;
    std::cerr << "commhost run: rank " << r.globalRank << " failed (" << describeFailure(r) << "); restarting it ("
              << r.restarts << " of --max-restarts " << plan_.maxRestarts
              << "): it joins the running job at the others' next syncPoint()" << std::endl;
    r.reports = RankReports{};  // the new process reports afresh
    try {
      r.pid = spawn(plan_, r, static_cast<int>(i), plan_.localRanks * plan_.nodes, signals_.parentMask(),
                    signals_.handled());
      r.exited = false;
      r.status = 0;
      ++running_;
    } catch (const std::exception& e) {
      std::cerr << "commhost run: cannot restart rank " << r.globalRank << ": " << e.what() << std::endl;
    }
  }

  // What the ranks reported (launch_reports.h), under the summary table: each rank's own
  // account of its failure, the ranks that never reached the store or never joined.
  void printReports() const {
    std::string unreached, unjoined;
    for (const Rank& r : ranks_) {
      const auto store = r.reports.store();
      if (store == RankReports::StoreReach::Waiting || store == RankReports::StoreReach::GaveUp)
        unreached += (unreached.empty() ? "" : ", ") + std::to_string(r.globalRank);
      else if (!r.reports.joined()) unjoined += (unjoined.empty() ? "" : ", ") + std::to_string(r.globalRank);
      if (r.reports.failure()) std::cerr << "  rank " << r.globalRank << ": " << r.reports.failureLine() << "\n";
      if (!r.reports.problem().empty())
        std::cerr << "  rank " << r.globalRank << " sent " << r.reports.problem() << "\n";
    }
    if (!unreached.empty())
      std::cerr << "  ranks that never reached the store: " << unreached
                << " (their 'store at host:port' lines above say where they looked; check that rank 0 or `commhost "
                   "store serve` runs there and MASTER_ADDR/MASTER_PORT)\n";
    // Only a commhost program joins; a rank running something else (a shell, a torch job
    // on torch's store) never reports, and is not named for it.
    const bool anyJoined = std::any_of(ranks_.begin(), ranks_.end(), [](const Rank& r) { return r.reports.joined(); });
    if (anyJoined && !unjoined.empty())
      std::cerr << "  ranks that never joined the job: " << unjoined
                << " (they failed or were stopped before their group was made; their output above says where)\n";
  }

  // keepGoing: some ranks failed and the others went on without them.
  int finishShrunk() const {
    std::string lost, restarted;
    int finished = 0;
    for (const Rank& r : ranks_) {
      if (failed(r.status))
        lost += (lost.empty() ? "" : ", ") + std::to_string(r.globalRank) + " (" + describeStatus(r.status) + ")";
      else ++finished;
      if (r.restarts > 0)
        restarted += (restarted.empty() ? "" : ", ") + std::to_string(r.globalRank) + " " + std::to_string(r.restarts) +
                     "x";
    }
    std::cerr << "commhost run: " << finished << " of " << ranks_.size() << " rank(s) of this node finished"
              << (lost.empty() ? "" : "; lost: " + lost) << (restarted.empty() ? "" : "; restarted: " + restarted)
              << "\n";
    return finished > 0 ? 0 : exitCodeOf(ranks_[firstFailure_ >= 0 ? firstFailure_ : 0].status);
  }

  void sendTerm() {
    termed_ = true;
    for (auto& r : ranks_)
      if (!r.exited && r.pid > 0) signalRank(r, SIGTERM);
    killAt_ = Clock::now() + plan_.grace;
  }
  // After a rank fails, the others usually fail at the same moment (a hang detected by
  // every watchdog): they get `settle` to exit and report by themselves before SIGTERM.
  // A survivor still writing is reporting (its error, its dump): each line it writes
  // renews the settle time, to at least reportWait (a supervisor waits up to a second
  // for its peers' dumps before its verdict), up to the longer of 4 x settle and 5 s in
  // all, so the survivors' own account of the failure comes out before they are stopped.
  void stopAll(const std::string& why, std::chrono::milliseconds settle) {
    if (stopping_) return;
    stopping_ = true;
    stopReason_ = why;
    termAt_ = Clock::now() + settle;
    settleLimit_ = Clock::now() + std::max(4 * settle, std::chrono::milliseconds(5000));
    if (settle.count() <= 0) sendTerm();
  }

  const LaunchPlan& plan_;
  const LoopSignals& signals_;
  std::vector<Rank> ranks_;
  const std::chrono::milliseconds reportWait_;
  int running_ = 0;
  int firstFailure_ = -1;  // index into ranks_
  std::string stopReason_;
  Clock::time_point termAt_{}, killAt_{}, settleLimit_{};
  bool stopping_ = false, termed_ = false, killed_ = false;
  int stopSignal_ = 0;  // the signal that stopped the launcher, if any
};

}  // namespace

int launch(const LaunchPlan& plan) {
  const bool watching = !plan.watchPath.empty() && plan.onConfigChange;
  const Watch watch(watching ? plan.watchPath : "");
  const LoopSignals signals(handledSignals(watching));
  Job job(plan, signals);
  if (job.start() && watching) plan.onConfigChange("edited as the job started");
  while (job.running()) {
    job.poll(watch);
    if (watch.fd >= 0 && watch.touched() && !job.stopping()) plan.onConfigChange("edited");
    job.readSignals(watching);
    job.reap();
    job.escalate();
  }
  job.drainOutput();
  return job.finish();
}

}  // namespace commhost::cli
// NOLINTEND(concurrency-mt-unsafe)
