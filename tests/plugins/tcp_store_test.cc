// SPDX-License-Identifier: Apache-2.0
// The tcp store against bad peers: garbage, truncated and oversized frames, missing or
// wrong tokens, a server that goes away mid-wait, many clients at once; and the plugin
// as a job loads it.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <random>
#include <thread>

#include "../host/test_util.h"
#include "commhost/sdk/host_address.h"
#include "protocol.h"
#include "store_fixtures.h"
#include "tcp_store.h"

namespace commhost::test {
namespace {

// A raw loopback connection for sending bytes no client would.
class RawSocket {
 public:
  explicit RawSocket(int port) : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) ADD_FAILURE() << "connect failed";
    timeval tv{5, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  }
  ~RawSocket() { ::close(fd_); }
  void send(const std::vector<uint8_t>& bytes) { ASSERT_GE(::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL), 0); }
  // True when the server closed the connection (recv sees EOF or a reset) within 5 s.
  bool closedByServer() {
    uint8_t buf[64];
    const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    return n == 0 || (n < 0 && errno == ECONNRESET);
  }
  // The body of the next whole frame the server sends within 5 s; empty when it closes
  // the connection (or stays silent) first.
  std::vector<uint8_t> frameBody() {
    std::vector<uint8_t> frame(tcpstore::kHeaderSize);
    if (!readExactly(frame.data(), frame.size())) return {};
    const uint32_t length = tcpstore::parseHeader(frame.data(), 1u << 20);
    std::vector<uint8_t> body(length);
    if (!readExactly(body.data(), body.size())) return {};
    return body;
  }

 private:
  bool readExactly(uint8_t* p, size_t n) {
    while (n > 0) {
      const ssize_t got = ::recv(fd_, p, n, 0);
      if (got <= 0) return false;
      p += got;
      n -= static_cast<size_t>(got);
    }
    return true;
  }
  int fd_;
};

std::vector<uint8_t> header(uint32_t magic, uint32_t length) {
  std::vector<uint8_t> h(8);
  for (int i = 0; i < 4; ++i) {
    h[i] = static_cast<uint8_t>(magic >> (8 * i));
    h[4 + i] = static_cast<uint8_t>(length >> (8 * i));
  }
  return h;
}

TEST(TcpStore, BadFramesCloseOnlyTheirConnection) {
  TcpFixture fixture;
  auto good = fixture.connect();
  good->set("k", toBytes("v"));
  std::mt19937 rng(42);
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<uint8_t> junk(1 + rng() % 200);
    for (auto& b : junk) b = static_cast<uint8_t>(rng());
    RawSocket raw(fixture.port());
    raw.send(junk);
    if (junk.size() >= 8) {
      EXPECT_TRUE(raw.closedByServer()) << "trial " << trial;
    }
  }
  {
    RawSocket http(fixture.port());
    const std::string get = "GET / HTTP/1.1\r\n\r\n";
    http.send(std::vector<uint8_t>(get.begin(), get.end()));
    EXPECT_TRUE(http.closedByServer());
  }
  {
    RawSocket oversized(fixture.port());
    oversized.send(header(tcpstore::kMagic, 1u << 30));
    EXPECT_TRUE(oversized.closedByServer());
  }
  {
    RawSocket wrongVersion(fixture.port());
    wrongVersion.send(header((tcpstore::kMagic & 0x00ffffff) | (9u << 24), 4));
    EXPECT_TRUE(wrongVersion.closedByServer());
  }
  {
    RawSocket badBody(fixture.port());  // a set whose key length runs past the frame
    std::vector<uint8_t> frame = header(tcpstore::kMagic, 9);
    for (uint8_t b :
         {uint8_t(2), uint8_t(200), uint8_t(0), uint8_t(0), uint8_t(0), uint8_t(1), uint8_t(2), uint8_t(3), uint8_t(4)})
      frame.push_back(b);
    badBody.send(frame);
    EXPECT_TRUE(badBody.closedByServer());
  }
  {
    RawSocket truncated(fixture.port());  // promises 100 bytes, sends 10, hangs up
    auto frame = header(tcpstore::kMagic, 100);
    frame.resize(18, 7);
    truncated.send(frame);
  }
  EXPECT_EQ(toString(good->get("k")), "v");  // everyone else is still served
  auto late = fixture.connect();
  EXPECT_EQ(toString(late->get("k")), "v");
}

TEST(TcpStore, DecoderRejectsEveryTruncationOfValidRequests) {
  tcpstore::Request r;
  r.op = tcpstore::Op::MultiSet;
  r.keys = {"a", "bb"};
  r.values = {toBytes("1"), toBytes("22")};
  const auto frame = tcpstore::encodeRequest(r);
  const uint8_t* body = frame.data() + tcpstore::kHeaderSize;
  const size_t size = frame.size() - tcpstore::kHeaderSize;
  const auto decoded = tcpstore::decodeRequest(body, size);
  EXPECT_EQ(decoded.keys, r.keys);
  EXPECT_EQ(decoded.values, r.values);
  for (size_t cut = 0; cut < size; ++cut)
    EXPECT_THROW(tcpstore::decodeRequest(body, cut), tcpstore::ProtocolError) << "cut at " << cut;
}

TEST(TcpStore, TokenRequired) {
  TcpFixture fixture("s3cret");
  auto withToken = fixture.connectWith("s3cret", std::chrono::seconds(5));
  withToken->set("k", toBytes("v"));
  // The server says why in its answer to the handshake, so the client can tell a wrong
  // token from a missing one (and both from a server at its connection limit).
  EXPECT_THROW_WITH(fixture.connectWith("wrong", std::chrono::seconds(5)), StoreError,
                    "127.0.0.1:", "refused this client: wrong auth token", "COMMHOST_STORE_TOKEN");
  EXPECT_THROW_WITH(fixture.connectWith("", std::chrono::seconds(5)), StoreError,
                    "127.0.0.1:", "it sent no auth token and this server requires one", "auth_token");
  EXPECT_EQ(toString(withToken->get("k")), "v");
}

// Each rank holds about two store connections: the default cap grows with the job (a
// fixed 4096 refused a ~2,048-rank job); a value set in the config is kept.
TEST(TcpStore, TheDefaultConnectionCapIsSizedFromTheJob) {
  EXPECT_EQ(tcpstore::connectionCap(0, 1), 4096);
  EXPECT_EQ(tcpstore::connectionCap(0, 1000), 4096);
  EXPECT_EQ(tcpstore::connectionCap(0, 2048), 4 * 2048 + 64);
  EXPECT_EQ(tcpstore::connectionCap(0, 100000), 400064);
  EXPECT_EQ(tcpstore::connectionCap(0, 1 << 30), 1 << 20);
  EXPECT_EQ(tcpstore::connectionCap(16, 2048), 16);
}

// A server that dies as a client connects (the kernel accepted, nobody answers): the
// client says the server went away, not that a token may be wrong.
TEST(TcpStore, AServerGoneDuringTheHandshakeIsNamedAsGone) {
  const int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(listener, 4), 0);
  socklen_t length = sizeof addr;
  ::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &length);
  std::thread dying([&] {
    const int fd = ::accept(listener, nullptr, nullptr);
    ::close(fd);  // no answer to the auth frame
  });
  tcpstore::ClientOptions options;
  options.port = ntohs(addr.sin_port);
  options.timeout = std::chrono::seconds(5);
  EXPECT_THROW_WITH(std::make_shared<tcpstore::Client>(options), StoreError,
                    "the store server at 127.0.0.1:", "went away", "still running");
  dying.join();
  ::close(listener);
}

TEST(TcpStore, ServerGoneMidWaitIsAnErrorNotAHang) {
  TcpFixture fixture;
  auto client = fixture.connect(std::chrono::seconds(60));
  std::thread killer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    fixture.stopServer();
  });
  const auto start = std::chrono::steady_clock::now();
  EXPECT_THROW_WITH(client->wait({"never"}, std::chrono::seconds(60)), StoreError, "wait",
                    "127.0.0.1:", "may have exited");
  killer.join();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
}

// A call that needs a new connection after the server died (another thread held the
// pooled one) fails in seconds, saying the server exited; it used to retry for the whole
// startup timeout, so a survivor's heartbeat never declared the store's rank lost.
TEST(TcpStore, ServerGoneNewConnectionFailsFast) {
  TcpFixture fixture;
  auto client = fixture.connect(std::chrono::seconds(60));
  client->set("k", toBytes("v"));
  fixture.stopServer();
  EXPECT_THROW(client->get("k"), StoreError);  // the pooled connection was reset
  const auto start = std::chrono::steady_clock::now();
  EXPECT_THROW_WITH(client->get("k"), StoreError, "127.0.0.1:", "served this client before", "has exited");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
}

TEST(TcpStore, NothingListeningGivesUpWithTheAddress) {
  int port = 0;
  {
    TcpFixture probe;  // a port that was just free, then freed again
    port = probe.port();
  }
  tcpstore::ClientOptions options;
  options.port = port;
  options.timeout = std::chrono::milliseconds(300);
  const std::string address = "127.0.0.1:" + std::to_string(port);
  EXPECT_THROW_WITH(tcpstore::Client client(options), StoreError, address.c_str(), "attempts",
                    "MASTER_ADDR/MASTER_PORT");
}

TEST(TcpStore, ManyClientsPassABarrier) {
  constexpr int kClients = 512;
  TcpFixture fixture;
  std::vector<std::thread> threads;
  threads.reserve(kClients);
  std::atomic<int> passed{0};
  for (int i = 0; i < kClients; ++i)
    threads.emplace_back([&] {
      auto store = fixture.connect(std::chrono::seconds(60));
      if (store->add("arrived", 1) == kClients) store->set("go", toBytes("1"));
      store->wait({"go"}, std::chrono::seconds(60));
      ++passed;
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(passed.load(), kClients);
}

TEST(TcpStore, PluginServesRankZeroAndConnectsTheOthers) {
  auto registry = testRegistry();
  const PluginEntry& tcp = registry->require("tcp", PluginKind::Store);
  int port = 0;
  {
    TcpFixture probe;
    port = probe.port();
  }
  const auto options = resolveOptions(tcp.descriptor->options, {{"timeout", "10s"}}, "test");
  StoreContext ctx;
  ctx.worldSize = 2;
  ctx.masterAddr = "127.0.0.1";
  ctx.masterPort = port;
  std::vector<StorePtr> stores(2);
  runRanks(2, [&](int r) {
    StoreContext mine = ctx;
    mine.rank = r;
    stores[r] = tcp.descriptor->createStore(options, mine);
  });
  stores[1]->set("from1", toBytes("hi"));
  EXPECT_EQ(toString(stores[0]->get("from1")), "hi");
  StoreContext noPort;
  noPort.rank = 1;
  noPort.worldSize = 2;
  EXPECT_THROW_WITH(tcp.descriptor->createStore(options, noPort), ConfigError, "no port", "MASTER_PORT");
  EXPECT_THROW_WITH(resolveOptions(tcp.descriptor->options, {{"serve", "sometimes"}}, "test"), ConfigError,
                    "'sometimes' is not one of auto, always, never");
  stores[1].reset();  // the client leaves first, so the serving rank need not linger
}

// With no bind set, the serving rank listens where its clients were told the store is: a
// loopback store host stays on loopback, and a store host that is not this host's is named.
TEST(TcpStore, TheServingRankBindsTheStoreHostsAddress) {
  auto registry = testRegistry();
  const PluginEntry& tcp = registry->require("tcp", PluginKind::Store);
  const auto options = resolveOptions(tcp.descriptor->options, {{"timeout", "10s"}}, "test");
  StoreContext ctx;
  ctx.rank = 0;
  ctx.worldSize = 1;
  ctx.masterAddr = "localhost";
  auto store = tcp.descriptor->createStore(options, ctx);  // port 0: any free one, on 127.0.0.1
  store->set("k", toBytes("v"));
  EXPECT_EQ(toString(store->get("k")), "v");
  store.reset();
  ctx.masterAddr = "192.0.2.77";  // TEST-NET-1: no host's address
  EXPECT_THROW_WITH(tcp.descriptor->createStore(options, ctx), ConfigError, "[rank 0] tcp store",
                    "'192.0.2.77' (MASTER_ADDR, or Slurm's first node)", "not an address of this host",
                    "set store.options.bind");
  const auto bound = resolveOptions(tcp.descriptor->options, {{"timeout", "10s"}, {"bind", "127.0.0.1"}}, "test");
  store = tcp.descriptor->createStore(bound, ctx);  // an explicit bind wins; clients still go to MASTER_ADDR
  EXPECT_NE(store, nullptr);
}

TEST(HostAddress, NamesResolveToThisHostsAddressesOrSayWhy) {
  EXPECT_EQ(localAddressOf("127.0.0.1").address, "127.0.0.1");
  EXPECT_EQ(localAddressOf("localhost").address.rfind("127.", 0) == 0 || localAddressOf("localhost").address == "::1",
            true);
  const LocalAddress foreign = localAddressOf("192.0.2.77");
  EXPECT_EQ(foreign.address, "");
  EXPECT_EQ(foreign.foreign, "192.0.2.77");
  EXPECT_EQ(foreign.error, "");
  const LocalAddress unknown = localAddressOf("no-such-host.invalid");
  EXPECT_EQ(unknown.address, "");
  EXPECT_NE(unknown.error, "");
  // This machine's name: its own address when that is not loopback, else loopback.
  const std::string mine = defaultHostAddress();
  EXPECT_FALSE(localAddressOf(mine).address.empty()) << mine << " is not an address of this host";
  EXPECT_TRUE(isLoopbackAddress("127.0.1.1"));
  EXPECT_TRUE(isLoopbackAddress("::1"));
  EXPECT_FALSE(isLoopbackAddress("10.77.0.1"));
}

TEST(TcpStore, OneThreadWaitingDoesNotHoldUpAnotherOnTheSameClient) {
  TcpFixture fixture;
  auto shared = fixture.connect(std::chrono::seconds(30));
  std::thread waiter([&] { shared->wait({"released"}, std::chrono::seconds(30)); });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the waiter is blocked in the server
  const auto start = std::chrono::steady_clock::now();
  shared->set("beat", toBytes("1"));  // would queue behind the wait on a single connection
  EXPECT_EQ(toString(shared->get("beat")), "1");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  shared->set("released", toBytes("go"));
  waiter.join();
}

TEST(TcpStore, ServerLingersWhileClientsRemainThenStops) {
  tcpstore::ServerOptions options;
  options.linger = std::chrono::seconds(20);
  auto server = std::make_unique<tcpstore::Server>(options);
  tcpstore::ClientOptions clientOptions;
  clientOptions.port = server->port();
  clientOptions.timeout = std::chrono::seconds(10);
  auto client = std::make_shared<tcpstore::Client>(clientOptions);
  client->set("early", toBytes("served"));  // the server has accepted this client
  std::atomic<bool> stopped{false};
  std::thread owner([&] {
    server.reset();  // the serving rank is done; a peer still needs the store
    stopped = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_FALSE(stopped.load());
  client->set("late", toBytes("still served"));
  EXPECT_EQ(toString(client->get("late")), "still served");
  const auto start = std::chrono::steady_clock::now();
  client.reset();  // last client gone: the server stops well before its linger ends
  owner.join();
  EXPECT_TRUE(stopped.load());
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
}

// Connects raw sockets until the server has accepted and kept one (it answers a ping),
// within 5 s; the frame is a ping request.
bool servedWithin5s(int port) {
  tcpstore::Request ping;
  ping.op = tcpstore::Op::Ping;
  const auto frame = tcpstore::encodeRequest(ping);
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (std::chrono::steady_clock::now() < until) {
    RawSocket s(port);
    s.send(frame);
    const auto body = s.frameBody();
    if (!body.empty() && body[0] == static_cast<uint8_t>(tcpstore::Status::Ok)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

TEST(TcpStore, UnauthenticatedFirstFrameMustBeASmallAuth) {
  tcpstore::ServerOptions options;
  options.token = "s3cret";
  options.maxFrame = 256u << 20;
  options.authTimeout = std::chrono::milliseconds(300);
  tcpstore::Server server(options);
  tcpstore::ClientOptions clientOptions;
  clientOptions.port = server.port();
  clientOptions.token = "s3cret";
  clientOptions.timeout = std::chrono::seconds(5);
  tcpstore::Client good(clientOptions);
  {
    // Before the fix this header made the server allocate 256 MiB and wait for it.
    RawSocket huge(server.port());
    huge.send(header(tcpstore::kMagic, 256u << 20));
    EXPECT_TRUE(huge.closedByServer());
  }
  {
    RawSocket silent(server.port());  // connects and never authenticates
    EXPECT_TRUE(silent.closedByServer());
  }
  good.set("k", toBytes("v"));
  EXPECT_EQ(toString(good.get("k")), "v");
  clientOptions.token = std::string(tcpstore::kMaxAuthBody, 'x');
  EXPECT_THROW_WITH(tcpstore::Client tooLong(clientOptions), ConfigError, "auth_token is", "at most");
}

TEST(TcpStore, StalledFrameIsDroppedButIdleConnectionsStay) {
  tcpstore::ServerOptions options;
  options.frameTimeout = std::chrono::milliseconds(300);
  tcpstore::Server server(options);
  tcpstore::ClientOptions clientOptions;
  clientOptions.port = server.port();
  clientOptions.timeout = std::chrono::seconds(5);
  tcpstore::Client idle(clientOptions);
  idle.set("k", toBytes("v"));
  {
    RawSocket stalled(server.port());  // promises 1 MiB, sends 10 bytes, then nothing
    auto frame = header(tcpstore::kMagic, 1u << 20);
    frame.resize(18, 7);
    stalled.send(frame);
    EXPECT_TRUE(stalled.closedByServer());  // within frame_timeout, not never
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(600));  // idle past frame_timeout
  EXPECT_EQ(toString(idle.get("k")), "v");                      // between frames a connection is never timed out
}

TEST(TcpStore, ConnectionsOverTheCapAreClosedUntilOneLeaves) {
  tcpstore::ServerOptions options;
  options.maxConnections = 2;
  options.logger = std::make_shared<Logger>("commhost.tcp", "cap test");
  tcpstore::Server server(options);
  tcpstore::ClientOptions clientOptions;
  clientOptions.port = server.port();
  clientOptions.timeout = std::chrono::seconds(5);
  auto first = std::make_unique<tcpstore::Client>(clientOptions);
  tcpstore::Client second(clientOptions);
  first->ping();
  second.ping();
  testing::internal::CaptureStderr();
  {
    RawSocket third(server.port());
    const auto body = third.frameBody();  // why, then the close
    ASSERT_FALSE(body.empty());
    EXPECT_EQ(body[0], static_cast<uint8_t>(tcpstore::Status::Error));
    EXPECT_TRUE(third.closedByServer());
  }
  Logger::flushAll();
  const std::string log = testing::internal::GetCapturedStderr();
  EXPECT_NE(log.find("refusing connection from 127.0.0.1: 2 connections are open (store option max_connections)"),
            std::string::npos)
      << log;
  second.ping();  // the others are still served
  first.reset();
  EXPECT_TRUE(servedWithin5s(server.port()));
}

// A client turned away at max_connections used to be told its auth token was refused
// (with a token) or that the server had exited (without one, at its first call): the
// server now answers the handshake with the reason, and the client reports it.
TEST(TcpStore, ClientOverTheCapIsToldWhy) {
  for (const std::string token : {"", "s3cret"}) {
    SCOPED_TRACE("token '" + token + "'");
    tcpstore::ServerOptions options;
    options.maxConnections = 1;
    options.token = token;
    tcpstore::Server server(options);
    tcpstore::ClientOptions clientOptions;
    clientOptions.port = server.port();
    clientOptions.token = token;
    clientOptions.timeout = std::chrono::seconds(5);
    clientOptions.rank = 3;
    tcpstore::Client first(clientOptions);
    first.ping();
    const std::string address = "127.0.0.1:" + std::to_string(server.port());
    try {
      tcpstore::Client second(clientOptions);
      second.ping();
      ADD_FAILURE() << "a client over max_connections was served";
    } catch (const StoreError& e) {
      const std::string message = e.what();
      for (const std::string& fragment : {std::string("[rank 3] "), address, std::string("max_connections 1"),
                                          std::string("raise the store's max_connections option")})
        EXPECT_NE(message.find(fragment), std::string::npos) << "lacks '" << fragment << "': " << message;
      EXPECT_EQ(message.find("auth token"), std::string::npos) << message;
      EXPECT_EQ(message.find("may have exited"), std::string::npos) << message;
    }
    first.ping();  // the one within the cap is still served
  }
}

}  // namespace
}  // namespace commhost::test
