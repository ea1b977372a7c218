// SPDX-License-Identifier: Apache-2.0
// Store figures, measured the way ../shared/peers/torch_tcpstore.py measures torch's
// TCPStore, so the two print comparable lines:
//   get round trip with 1 client (the server in this process, as torch's master is),
//   total gets/s with N client processes for S seconds,
//   time for M clients (threads) to connect and pass a barrier through the store.
//   commhost_bench_store [CLIENTS=8] [SECONDS=3] [BARRIER_CLIENTS=512]
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include "client.h"
#include "server.h"

using namespace commhost;
using Clock = std::chrono::steady_clock;

namespace {

std::unique_ptr<tcpstore::Client> connect(int port) {
  tcpstore::ClientOptions options;
  options.port = port;
  options.timeout = std::chrono::seconds(60);
  return std::make_unique<tcpstore::Client>(options);
}

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

}  // namespace

int main(int argc, char** argv) {
  const int clients = argc > 1 ? std::atoi(argv[1]) : 8;
  const double secs = argc > 2 ? std::atof(argv[2]) : 3;
  const int barrierClients = argc > 3 ? std::atoi(argv[3]) : 512;

  tcpstore::ServerOptions serverOptions;
  serverOptions.maxConnections = std::max(4096, barrierClients + clients + 8);  // this bench's own two too
  tcpstore::Server server(serverOptions);
  const int port = server.port();
  auto master = connect(port);
  master->set("k", Bytes(16, 'v'));

  auto c = connect(port);
  for (int i = 0; i < 100; ++i) c->get("k");
  const int n = 20000;
  auto t0 = Clock::now();
  for (int i = 0; i < n; ++i) c->get("k");
  std::printf("get round trip, 1 client: %.1f us\n", seconds(Clock::now() - t0) / n * 1e6);

  // Each client process writes its rate to a pipe.
  int fds[2];
  if (::pipe(fds) != 0) return 1;
  std::vector<pid_t> children;
  for (int i = 0; i < clients; ++i) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      auto mine = connect(port);
      long count = 0;
      const auto start = Clock::now();
      while (seconds(Clock::now() - start) < secs) {
        mine->get("k");
        ++count;
      }
      const double rate = count / seconds(Clock::now() - start);
      if (::write(fds[1], &rate, sizeof rate) != sizeof rate) _exit(1);
      _exit(0);
    }
    children.push_back(pid);
  }
  double total = 0;
  for (int i = 0; i < clients; ++i) {
    double rate = 0;
    if (::read(fds[0], &rate, sizeof rate) == sizeof rate) total += rate;
  }
  for (pid_t pid : children) ::waitpid(pid, nullptr, 0);
  std::printf("gets/s, %d clients: %.0f\n", clients, total);

  std::atomic<int> passed{0};
  t0 = Clock::now();
  std::vector<std::thread> threads;
  for (int i = 0; i < barrierClients; ++i)
    threads.emplace_back([&] {
      auto store = connect(port);
      if (store->add("arrived", 1) == barrierClients) store->set("go", Bytes{1});
      store->wait({"go"}, std::chrono::seconds(60));
      ++passed;
    });
  for (auto& t : threads) t.join();
  std::printf("%d clients connect + barrier: %.1f ms (%d passed)\n", barrierClients, seconds(Clock::now() - t0) * 1e3,
              passed.load());
  return passed.load() == barrierClients ? 0 : 1;
}
