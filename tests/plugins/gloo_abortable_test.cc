// SPDX-License-Identifier: Apache-2.0
// plugins/gloo/abortable.h on real Gloo contexts (two ranks as threads, real sockets on
// loopback): abortAll() ends a send Gloo queued on a connection that could no longer be
// written, which no failure of that connection ends (Gloo's Pair::signalException does
// not fail the unbound buffers it queued). That wait lasted the whole timeout before.
#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <gloo/common/error.h>
#include <gloo/rendezvous/hash_store.h>
#include <gloo/transport/tcp/address.h>
#include <gloo/transport/tcp/device.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <future>
#include <thread>

#include "../../plugins/gloo/abortable.h"

namespace commhost::gloo_backend {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// Two ranks' contexts, connected to each other, each listing its buffers in its registry.
struct TwoRanks {
  std::shared_ptr<AbortRegistry> registry[2] = {std::make_shared<AbortRegistry>(), std::make_shared<AbortRegistry>()};
  std::shared_ptr<MeshContext> context[2];

  explicit TwoRanks(milliseconds timeout) {
    ::signal(SIGPIPE, SIG_IGN);  // as the backend does: Gloo writes without MSG_NOSIGNAL
    ::gloo::rendezvous::HashStore store;
    ::gloo::transport::tcp::attr attr;
    attr.hostname = "127.0.0.1";
    std::thread ranks[2];
    for (int r = 0; r < 2; ++r)
      ranks[r] = std::thread([&, r] {
        auto device = ::gloo::transport::tcp::CreateDevice(attr);
        context[r] = std::make_shared<MeshContext>(r, 2);
        context[r]->connectFullMesh(store, device);
        context[r]->finishConnect(timeout, registry[r]);
      });
    for (auto& t : ranks) t.join();
  }
};

// This process's socket whose local end is `local` ("[127.0.0.1]:port", Gloo's form).
int socketAt(const std::string& local) {
  DIR* dir = ::opendir("/proc/self/fd");
  int found = -1;
  while (dirent* entry = dir ? ::readdir(dir) : nullptr) {
    const int fd = std::atoi(entry->d_name);
    sockaddr_storage addr{};
    socklen_t len = sizeof(addr);
    if (entry->d_name[0] != '.' && ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0 &&
        addr.ss_family == AF_INET &&
        ::gloo::transport::tcp::Address(reinterpret_cast<sockaddr*>(&addr), len).str() == local) {
      sockaddr_storage peer{};
      socklen_t peerLen = sizeof(peer);
      if (::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peerLen) == 0) found = fd;
    }
  }
  if (dir) ::closedir(dir);
  return found;
}

TEST(GlooAbortable, AbortEndsASendGlooQueuedOnAConnectionItCouldNotWrite) {
  // Rank 1 posts a receive, so rank 0's send is written at once. Rank 0's socket is shut
  // for writing first: writev fails with EPIPE, which Gloo's async path takes for a full
  // socket, and the send waits in the pair's queue. Rank 1 sees the end of stream and
  // closes, rank 0's pair fails, and the send stays queued: nothing but the timeout
  // (60 s) or abortAll() ends its wait. If rank 0's pair fails before the send is posted
  // (rank 0's transport thread is quicker than this thread), send() throws: a new pair
  // of contexts, up to 5 times.
  bool queued = false;
  for (int attempt = 0; attempt < 5 && !queued; ++attempt) {
    TwoRanks ranks(seconds(60));
    std::vector<float> in(1024, 1.0f), out(1024, 0.0f);
    auto recv = ranks.context[1]->createUnboundBuffer(out.data(), out.size() * sizeof(float));
    recv->recv(0, 7);
    std::this_thread::sleep_for(milliseconds(300));  // rank 1's "ready to receive" reaches rank 0

    auto send = ranks.context[0]->createUnboundBuffer(in.data(), in.size() * sizeof(float));
    const int fd = socketAt(ranks.context[0]->getPair(1)->address().str());
    ASSERT_GE(fd, 0) << "rank 0's socket to rank 1";
    ASSERT_EQ(::shutdown(fd, SHUT_WR), 0);
    try {
      send->send(1, 7);
    } catch (const ::gloo::IoException& e) {
      continue;  // the pair had failed already: nothing was queued
    }
    queued = true;
    auto waited = std::async(std::launch::async, [&] {
      try {
        send->waitSend(seconds(60));
        return std::string("completed");
      } catch (const ::gloo::IoException& e) {
        return std::string(e.what());
      }
    });
    // The failed connection does not end the wait: it still runs after 1 s.
    EXPECT_EQ(waited.wait_for(seconds(1)), std::future_status::timeout) << waited.get();
    const auto aborted = std::chrono::steady_clock::now();
    ranks.registry[0]->abortAll();
    ASSERT_EQ(waited.wait_for(seconds(20)), std::future_status::ready) << "abortAll() did not end the wait";
    EXPECT_LT(std::chrono::steady_clock::now() - aborted, seconds(20));
    EXPECT_NE(waited.get().find("aborted during a send wait"), std::string::npos);
    // Later calls on any buffer of the aborted rank throw at once; rank 1's are untouched.
    EXPECT_THROW(send->send(1, 8), ::gloo::IoException);
    auto late = ranks.context[0]->createUnboundBuffer(in.data(), 4);
    EXPECT_THROW(late->waitRecv(seconds(60)), ::gloo::IoException);
    EXPECT_FALSE(ranks.registry[1]->aborted());
  }
  EXPECT_TRUE(queued) << "in 5 attempts rank 0's pair always failed before the send was posted";
}

// The wrapping changes nothing else: a send and a receive complete, with the data.
TEST(GlooAbortable, WrappedBuffersCarryData) {
  TwoRanks ranks(seconds(20));
  std::vector<float> in(256), out(256, 0.0f);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(i);
  auto recv = ranks.context[1]->createUnboundBuffer(out.data(), out.size() * sizeof(float));
  auto send = ranks.context[0]->createUnboundBuffer(in.data(), in.size() * sizeof(float));
  recv->recv(0, 3);
  send->send(1, 3);
  int from = -1;
  EXPECT_TRUE(send->waitSend(seconds(20)));
  EXPECT_TRUE(recv->waitRecv(&from, seconds(20)));
  EXPECT_EQ(from, 0);
  EXPECT_EQ(out, in);
}

}  // namespace
}  // namespace commhost::gloo_backend
