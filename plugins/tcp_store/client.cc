#include "client.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <random>
#include <thread>

#include "commhost/errors.h"
#include "commhost/option_schema.h"

namespace commhost::tcpstore {
namespace {

using Clock = std::chrono::steady_clock;
// Time allowed beyond a server-side wait for the answer to cross the network.
constexpr std::chrono::seconds kNetworkGrace(10);

int connectOnce(const std::string& host, int port, std::string& error) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found);
  if (rc != 0) {
    error = std::string("cannot resolve host: ") + ::gai_strerror(rc);
    return -1;
  }
  int fd = -1;
  for (addrinfo* a = found; a; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0) break;
    error = std::strerror(errno);
    ::close(fd);
    fd = -1;
  }
  ::freeaddrinfo(found);
  if (fd >= 0) {
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
  return fd;
}

// Reads exactly n bytes before `deadline`; returns "" or what went wrong.
std::string readAll(int fd, uint8_t* p, size_t n, Clock::time_point deadline) {
  while (n > 0) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return "no answer in time";
    pollfd pfd{fd, POLLIN, 0};
    const int ready = ::poll(&pfd, 1, static_cast<int>(std::min<int64_t>(left, 1 << 30)));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) continue;
    const ssize_t got = ::recv(fd, p, n, 0);
    if (got == 0) return "the server closed the connection";
    if (got < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return std::strerror(errno);
    }
    p += got;
    n -= static_cast<size_t>(got);
  }
  return "";
}

std::string writeAll(int fd, const uint8_t* p, size_t n) {
  while (n > 0) {
    const ssize_t sent = ::send(fd, p, n, MSG_NOSIGNAL);
    if (sent < 0) {
      if (errno == EINTR) continue;
      return std::strerror(errno);
    }
    p += sent;
    n -= static_cast<size_t>(sent);
  }
  return "";
}

}  // namespace

Client::Client(ClientOptions options, std::shared_ptr<void> keepAlive)
    : Store(options.timeout),
      keepAlive_(std::move(keepAlive)),
      options_(std::move(options)),
      where_(options_.host + ":" + std::to_string(options_.port)) {
  std::lock_guard<std::mutex> lock(mutex_);
  connectWithRetry();
}

Client::~Client() { closeSocket(); }

void Client::closeSocket() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

// Exponential backoff with jitter, so hundreds of ranks starting together do not
// reconnect in lockstep.
void Client::connectWithRetry() {
  const auto deadline = Clock::now() + options_.timeout;
  std::mt19937 rng(std::random_device{}());
  auto delay = std::chrono::milliseconds(10);
  int attempts = 0;
  std::string error;
  while (true) {
    ++attempts;
    fd_ = connectOnce(options_.host, options_.port, error);
    if (fd_ >= 0) break;
    if (Clock::now() + delay > deadline)
      throw StoreError("cannot connect to the store at " + where_ + " after " + std::to_string(attempts) +
                       " attempts over " + formatDuration(options_.timeout) + " (" + error +
                       "). Check that rank 0 (serve: auto) or `commhost store serve` is running there, and the "
                       "store host/port (MASTER_ADDR/MASTER_PORT)");
    std::uniform_real_distribution<double> jitter(0.75, 1.25);
    std::this_thread::sleep_for(std::chrono::milliseconds(static_cast<int64_t>(delay.count() * jitter(rng))));
    delay = std::min(delay * 2, std::chrono::milliseconds(1000));
  }
  if (!options_.token.empty()) {
    FrameWriter auth;
    auth.u8(static_cast<uint8_t>(Op::Auth)).str(options_.token);
    const auto& frame = auth.finish();
    std::string problem = writeAll(fd_, frame.data(), frame.size());
    uint8_t header[kHeaderSize];
    if (problem.empty()) problem = readAll(fd_, header, kHeaderSize, Clock::now() + options_.timeout);
    if (!problem.empty()) {
      closeSocket();
      throw StoreError("the store at " + where_ + " refused this client's auth token (" + problem +
                       "); use the same auth_token / COMMHOST_STORE_TOKEN as the server");
    }
    std::vector<uint8_t> body(parseHeader(header, options_.maxFrame));
    readAll(fd_, body.data(), body.size(), Clock::now() + options_.timeout);
  }
}

void Client::lost(Op op, const std::string& what) {
  closeSocket();
  throw StoreError("store " + std::string(opName(op)) + " at " + where_ + " failed: " + what +
                   ". The store server (rank 0, or `commhost store serve`) may have exited or dropped this client; "
                   "check its log (a wrong or missing auth_token closes the connection)");
}

std::vector<uint8_t> Client::call(Op op, FrameWriter& request, std::chrono::milliseconds serverWait) {
  const auto& frame = request.finish();
  if (frame.size() - kHeaderSize > options_.maxFrame)
    throw InvalidArgument("store " + std::string(opName(op)) + ": request of " + std::to_string(frame.size()) +
                          " bytes is over the frame limit (store option max_frame)");
  if (fd_ < 0) connectWithRetry();
  if (auto problem = writeAll(fd_, frame.data(), frame.size()); !problem.empty()) lost(op, problem);
  const auto deadline = Clock::now() + serverWait + kNetworkGrace;
  uint8_t header[kHeaderSize];
  if (auto problem = readAll(fd_, header, kHeaderSize, deadline); !problem.empty()) lost(op, problem);
  std::vector<uint8_t> body;
  try {
    body.resize(parseHeader(header, options_.maxFrame));
  } catch (const ProtocolError& e) {
    lost(op, std::string("malformed answer: ") + e.what());
  }
  if (auto problem = readAll(fd_, body.data(), body.size(), deadline); !problem.empty()) lost(op, problem);
  const auto status = static_cast<Status>(body[0]);
  if (status == Status::Ok) return body;
  FrameReader in(body.data() + 1, body.size() - 1);
  if (status == Status::Timeout) {
    std::string missing;
    for (const auto& k : in.strings()) missing += (missing.empty() ? "'" : ", '") + k + "'";
    throw TimeoutError("store " + std::string(opName(op)) + " at " + where_ + " timed out after " +
                       formatDuration(serverWait) + "; keys not set: " + missing +
                       ". The rank that sets them may have failed or not reached this point");
  }
  throw StoreError("store " + std::string(opName(op)) + " at " + where_ + " failed: " + in.str());
}

namespace {
FrameWriter request(Op op) {
  FrameWriter f;
  f.u8(static_cast<uint8_t>(op));
  return f;
}
uint64_t ms(std::chrono::milliseconds d) { return static_cast<uint64_t>(std::max<int64_t>(d.count(), 0)); }
}  // namespace

#define COMMHOST_CALL(op, req, wait)                       \
  std::lock_guard<std::mutex> lock(mutex_);                \
  const std::vector<uint8_t> body = call(op, req, wait);   \
  [[maybe_unused]] FrameReader in(body.data() + 1, body.size() - 1)

void Client::set(const std::string& key, const Bytes& value) {
  auto req = request(Op::Set).str(key).bytes(value);
  COMMHOST_CALL(Op::Set, req, timeout_);
}

Bytes Client::get(const std::string& key) {
  auto req = request(Op::Get).str(key).u64(ms(timeout_));
  COMMHOST_CALL(Op::Get, req, timeout_);
  return in.bytes();
}

int64_t Client::add(const std::string& key, int64_t delta) {
  auto req = request(Op::Add).str(key).u64(static_cast<uint64_t>(delta));
  COMMHOST_CALL(Op::Add, req, timeout_);
  return static_cast<int64_t>(in.u64());
}

Bytes Client::compareSet(const std::string& key, const Bytes& expected, const Bytes& desired) {
  auto req = request(Op::CompareSet).str(key).bytes(expected).bytes(desired);
  COMMHOST_CALL(Op::CompareSet, req, timeout_);
  return in.bytes();
}

void Client::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  auto req = request(Op::Wait).strings(keys).u64(ms(timeout));
  COMMHOST_CALL(Op::Wait, req, timeout);
}

bool Client::check(const std::vector<std::string>& keys) {
  auto req = request(Op::Check).strings(keys);
  COMMHOST_CALL(Op::Check, req, timeout_);
  return in.u8() != 0;
}

bool Client::deleteKey(const std::string& key) {
  auto req = request(Op::Delete).str(key);
  COMMHOST_CALL(Op::Delete, req, timeout_);
  return in.u8() != 0;
}

int64_t Client::numKeys() {
  auto req = request(Op::NumKeys);
  COMMHOST_CALL(Op::NumKeys, req, timeout_);
  return static_cast<int64_t>(in.u64());
}

std::vector<Bytes> Client::multiGet(const std::vector<std::string>& keys) {
  auto req = request(Op::MultiGet).strings(keys).u64(ms(timeout_));
  COMMHOST_CALL(Op::MultiGet, req, timeout_);
  std::vector<Bytes> values(in.u64());
  for (auto& v : values) v = in.bytes();
  return values;
}

void Client::multiSet(const std::vector<std::string>& keys, const std::vector<Bytes>& values) {
  if (keys.size() != values.size())
    throw InvalidArgument("multiSet got " + std::to_string(keys.size()) + " keys but " +
                          std::to_string(values.size()) + " values");
  auto req = request(Op::MultiSet).strings(keys).u64(values.size());
  for (const auto& v : values) req.bytes(v);
  COMMHOST_CALL(Op::MultiSet, req, timeout_);
}

void Client::append(const std::string& key, const Bytes& value) {
  auto req = request(Op::Append).str(key).bytes(value);
  COMMHOST_CALL(Op::Append, req, timeout_);
}

void Client::ping() {
  auto req = request(Op::Ping);
  COMMHOST_CALL(Op::Ping, req, timeout_);
}

#undef COMMHOST_CALL

}  // namespace commhost::tcpstore
