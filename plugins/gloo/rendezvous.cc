// SPDX-License-Identifier: Apache-2.0
#include "rendezvous.h"

#include <dirent.h>
#include <gloo/alltoall.h>
#include <gloo/rendezvous/context.h>
#include <gloo/transport/tcp/device.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <thread>

#include "commhost/errors.h"
#include "commhost/sdk/backend_sdk.h"
#include "commhost/sdk/host_address.h"
#include "placement.h"

namespace commhost::gloo_backend {

StoreAdapter::StoreAdapter(StorePtr store, std::string prefix, std::chrono::milliseconds timeout)
    : store_(std::move(store)), prefix_(std::move(prefix)), timeout_(timeout) {}

void StoreAdapter::set(const std::string& key, const std::vector<char>& data) {
  store_->set(full(key), Bytes(data.begin(), data.end()));
}

std::vector<char> StoreAdapter::get(const std::string& key) {
  store_->wait({full(key)}, timeout_);
  const Bytes value = store_->get(full(key));
  return std::vector<char>(value.begin(), value.end());
}

void StoreAdapter::wait(const std::vector<std::string>& keys) { wait(keys, timeout_); }

// Gloo passes its context's timeout, which connectContexts shortens for the pairs'
// connect (see there): the store waits keep the rendezvous timeout given here.
void StoreAdapter::wait(const std::vector<std::string>& keys, const std::chrono::milliseconds&) {
  std::vector<std::string> full;
  for (const auto& k : keys) full.push_back(this->full(k));
  store_->wait(full, timeout_);
}

std::string resolveAddress(const std::string& device, std::string* problem) {
  const LocalAddress found = localAddressOf(device);
  if (!found.error.empty())
    *problem = "device '" + device + "' is neither a network interface of this host (none in /sys/class/net) nor a " +
               "hostname or address it can resolve (" + found.error + ")";
  else if (found.address.empty())
    *problem = "device '" + device + "' resolves to " + found.foreign +
               ", none of them an address of this host (bind failed)";
  return found.address;
}

std::string deviceProblem(const std::string& device) {
  struct stat st {};
  if (device.empty() || ::stat(("/sys/class/net/" + device).c_str(), &st) == 0) return "";
  std::string problem;
  if (!resolveAddress(device, &problem).empty()) return "";
  return problem + ". Set it to an interface (ip -br link), a local address or a hostname of this host";
}

std::string numericAddress(const std::string& device, const BackendContext& ctx) {
  std::string problem;
  const std::string address = resolveAddress(device, &problem);
  if (address.empty())
    raise(ErrorCode::Config, ErrorContext::of(ctx, "gloo device"), problem,
          "Set backends." + ctx.backendName +
              ".options.device to an interface (ip -br link), a local address or a hostname of this host");
  return address;
}

std::shared_ptr<::gloo::transport::Device> createDevice(const std::string& device, const BackendContext& ctx,
                                                        const std::vector<int>& transportCpus) {
  ::gloo::transport::tcp::attr attr;
  struct stat st {};
  if (device.empty()) {
    attr.hostname = defaultHostAddress();
  } else if (::stat(("/sys/class/net/" + device).c_str(), &st) == 0) {
    attr.iface = device;
  } else {
    // Debian's Gloo reads getaddrinfo's result even when the lookup failed (it checks for
    // -1, which getaddrinfo never returns), so a name that does not resolve walked an
    // uninitialized pointer: every rank crashed on the second mistyped device. Resolved
    // here instead, Gloo gets a numeric address, whose lookup cannot fail.
    attr.hostname = numericAddress(device, ctx);
  }
  // Gloo starts its transport thread in the device's constructor, with no say in where it
  // runs: made from a thread of our own, it inherits that thread's name and CPUs.
  std::shared_ptr<::gloo::transport::Device> created;
  std::string error;
  bool pinned = true;
  std::thread maker([&] {
    ::prctl(PR_SET_NAME, "gloo transport", 0, 0, 0);
    if (!transportCpus.empty()) pinned = pinCurrentThread(transportCpus);
    try {
      created = ::gloo::transport::tcp::CreateDevice(attr);
    } catch (const std::exception& e) {
      error = e.what();
    } catch (...) {
      error = "an unknown exception";
    }
  });
  maker.join();
  if (!created)
    raise(ErrorCode::Config, ErrorContext::of(ctx, "gloo device"),
          "cannot create a TCP device on '" + (device.empty() ? "127.0.0.1" : device) + "': " + error,
          "Set backends." + ctx.backendName + ".options.device to an interface or address of this host");
  if (!pinned && ctx.logger)
    ctx.logger->warn("gloo placement: cannot keep the transport thread on CPU " + cpuList(transportCpus) +
                     " (sched_setaffinity refused it); it runs on any CPU. Set backends." + ctx.backendName +
                     ".options.thread_placement: off to silence this");
  return created;
}

int ranksSharingCpus(const BackendContext& ctx, const std::vector<int>& cpus) {
  if (ctx.worldSize == 1) return 1;
  const std::string mine = hostIdentity() + " cpus " + cpuList(cpus);
  const auto all = exchangeAll(ctx, "placement/host", mine, "gloo thread placement");
  return static_cast<int>(std::count(all.begin(), all.end(), mine));
}

namespace {

// Every pair of `context` carries one message each way, within `timeout`. Gloo's connect
// can return with a pair that is closed (an accept() that failed for want of file
// descriptors closes it in the transport thread, and the waiting connect sees a state past
// "connected"), so a rank would report a backend it cannot use: found here instead, as
// this rank's build failure.
void verifyMesh(const BackendContext& ctx, const std::shared_ptr<::gloo::Context>& context, int index,
                std::chrono::milliseconds timeout) {
  std::vector<int32_t> mine(ctx.worldSize, ctx.rank), theirs(ctx.worldSize, -1);
  ::gloo::AlltoallOptions opts(context);
  opts.setInput(mine.data(), mine.size());
  opts.setOutput(theirs.data(), theirs.size());
  opts.setTag(0xC0FFEE);  // before any op: no op's tag (its seq) can meet it
  opts.setTimeout(timeout);
  std::string error;
  try {
    ::gloo::alltoall(opts);
  } catch (const std::exception& e) {
    error = e.what();
  }
  for (int r = 0; r < ctx.worldSize && error.empty(); ++r)
    if (theirs[r] != r) error = "rank " + std::to_string(r) + " sent " + std::to_string(theirs[r]);
  if (!error.empty())
    raise(ErrorCode::PeerLost, ErrorContext::of(ctx, "gloo rendezvous"),
          "context " + std::to_string(index) + " connected but does not carry messages to every rank: " + error,
          "check this rank's file-descriptor limit (ulimit -n; each context takes one socket per peer) and that "
          "every rank can reach this host's device address");
}

// Every pair of a context holds a socket, and Gloo may run out of descriptors in a thread
// of its own: Debian 13's Gloo accepts on a listener thread, where EMFILE throws and ends
// the process. So a mesh that cannot fit under this rank's descriptor limit is refused,
// with the rank and the numbers, before any of it is made.
void checkDescriptors(const BackendContext& ctx, int count) {
  rlimit limit{};
  if (ctx.worldSize < 2 || ::getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return;
  DIR* dir = ::opendir("/proc/self/fd");
  if (!dir) return;   // no /proc: Gloo reports it as it happens
  int64_t open = -3;  // ".", ".." and the directory's own descriptor
  while (::readdir(dir)) ++open;
  ::closedir(dir);
  constexpr int64_t kSpare = 8;  // the listener, epoll and what the rendezvous opens meanwhile
  const int64_t needed = int64_t{count} * (ctx.worldSize - 1) + kSpare;
  const int64_t free = static_cast<int64_t>(limit.rlim_cur) - open;
  if (needed > free)
    raise(ErrorCode::Backend, ErrorContext::of(ctx, "gloo rendezvous"),
          "connecting " + std::to_string(count) + " context(s) to " + std::to_string(ctx.worldSize - 1) +
              " peer(s) needs about " + std::to_string(needed) + " file descriptors, and " + std::to_string(free) +
              " of this rank's limit of " + std::to_string(limit.rlim_cur) + " are free (Too many open files)",
          "raise the limit (ulimit -n) for this rank, or lower backends.gloo.options.contexts");
}

}  // namespace

// Gloo waits for a pair to connect for five times its context's timeout (waitUntil in
// gloo/transport/tcp/pair.h): a rank whose peer could not complete the mesh sat in
// Pair::connect for 5 x group.timeout, long after the others had given the swap up. The
// pairs are made with a fifth of it, so that connect, like every other wait here (the
// store's for the peers' addresses, the verification), ends within `timeout`; the
// contexts' timeouts go back to `timeout` for the ops.
std::vector<std::shared_ptr<::gloo::Context>> connectContexts(const BackendContext& ctx,
                                                              const std::shared_ptr<::gloo::transport::Device>& device,
                                                              int count, std::chrono::milliseconds timeout,
                                                              const std::shared_ptr<AbortRegistry>& registry) {
  checkDescriptors(ctx, count);
  // A peer that never publishes its address (it failed before the mesh) is given up on
  // within 3/4 of the timeout: a hot swap's report phase waits `timeout` for every rank's
  // report, and this rank's must arrive inside it.
  const auto addressWait = std::max(std::chrono::milliseconds(1), timeout * 3 / 4);
  std::vector<std::shared_ptr<::gloo::Context>> contexts;
  for (int i = 0; i < count; ++i) {
    StoreAdapter store(ctx.store, "context" + std::to_string(i), addressWait);
    auto context = std::make_shared<MeshContext>(ctx.rank, ctx.worldSize);
    context->setTimeout(std::max(std::chrono::milliseconds(1), timeout / 5));
    try {
      auto dev = device;  // Gloo takes a non-const reference
      context->connectFullMesh(store, dev);
    } catch (const Error&) {
      throw;
    } catch (const std::exception& e) {
      raise(ErrorCode::PeerLost, ErrorContext::of(ctx, "gloo rendezvous"),
            "connecting context " + std::to_string(i) + " to the other ranks failed: " + e.what(),
            "Check that every rank started, can reach this host's device address, and has file descriptors to spare "
            "(ulimit -n)");
    }
    context->finishConnect(timeout, registry);
    contexts.push_back(std::move(context));
  }
  for (int i = 0; i < count && ctx.worldSize > 1; ++i) verifyMesh(ctx, contexts[i], i, timeout);
  return contexts;
}

std::map<std::string, int> exchangeEndpoints(const BackendContext& ctx,
                                             const std::vector<std::shared_ptr<::gloo::Context>>& contexts,
                                             std::chrono::milliseconds timeout) {
  // A pair's address() is its own end of the connected socket, which is exactly what
  // the other side's Gloo messages print as the peer.
  std::string mine;
  for (const auto& context : contexts)
    for (int peer = 0; peer < ctx.worldSize; ++peer)
      if (peer != ctx.rank) mine += context->getPair(peer)->address().str() + "\n";
  StoreAdapter store(ctx.store, "endpoints", timeout);
  store.set(std::to_string(ctx.rank), std::vector<char>(mine.begin(), mine.end()));
  std::map<std::string, int> byAddress;
  for (int peer = 0; peer < ctx.worldSize; ++peer) {
    if (peer == ctx.rank) continue;
    const std::vector<char> value = store.get(std::to_string(peer));
    std::string line;
    for (char c : value) {
      if (c != '\n') {
        line += c;
        continue;
      }
      byAddress[line] = peer;
      line.clear();
    }
  }
  return byAddress;
}

}  // namespace commhost::gloo_backend
