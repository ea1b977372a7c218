// SPDX-License-Identifier: Apache-2.0
#include "client.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <random>
#include <system_error>
#include <thread>

#include "commhost/errors.h"
#include "commhost/sdk/option_schema.h"
#include "commhost/sdk/tcp_connect.h"

namespace commhost::tcpstore {
namespace {

using Clock = std::chrono::steady_clock;
// Time allowed beyond a server-side wait for the answer to cross the network.
constexpr std::chrono::seconds kNetworkGrace(10);

// Reads until `have` >= `need` (taking whatever more arrives, up to `capacity`) before
// `deadline`; returns "" or what went wrong.
std::string readAtLeast(int fd, uint8_t* buf, size_t capacity, size_t& have, size_t need, Clock::time_point deadline) {
  while (have < need) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return "no answer in time";
    pollfd pfd{fd, POLLIN, 0};
    const int ready = ::poll(&pfd, 1, static_cast<int>(std::min<int64_t>(left, 1 << 30)));
    if (ready <= 0) continue;  // EINTR or not yet: look at the clock again
    const ssize_t got = ::recv(fd, buf + have, capacity - have, 0);
    if (got == 0) return "the server closed the connection";
    if (got < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return std::generic_category().message(errno);
    }
    have += static_cast<size_t>(got);
  }
  return "";
}

// Reads one whole frame into `frame` (header included).
std::string readFrame(int fd, std::vector<uint8_t>& frame, uint32_t maxFrame, Clock::time_point deadline) {
  if (frame.size() < 4096) frame.resize(4096);
  size_t have = 0;
  if (auto problem = readAtLeast(fd, frame.data(), frame.size(), have, kHeaderSize, deadline); !problem.empty())
    return problem;
  const size_t total = kHeaderSize + parseHeader(frame.data(), maxFrame);
  if (frame.size() < total) frame.resize(total);
  if (auto problem = readAtLeast(fd, frame.data(), total, have, total, deadline); !problem.empty()) return problem;
  frame.resize(total);
  return "";
}

std::string writeAll(int fd, const uint8_t* p, size_t n) {
  while (n > 0) {
    const ssize_t sent = ::send(fd, p, n, MSG_NOSIGNAL);
    if (sent < 0) {
      if (errno == EINTR) continue;
      return std::generic_category().message(errno);
    }
    p += sent;
    n -= static_cast<size_t>(sent);
  }
  return "";
}

}  // namespace

Client::Client(ClientOptions options, std::shared_ptr<void> keepAlive)
    : StoreBase(options.timeout),
      keepAlive_(std::move(keepAlive)),
      options_(std::move(options)),
      where_(options_.host + ":" + std::to_string(options_.port)) {
  const size_t authBody = 1 + 4 + options_.token.size();
  if (authBody > kMaxAuthBody)
    raise(ErrorCode::Config, context(),
          "tcp store: auth_token is " + std::to_string(options_.token.size()) + " bytes; at most " +
              std::to_string(kMaxAuthBody - 5) + " are allowed",
          "Use a shorter secret");
  giveBack(connectWithRetry());
}

ErrorContext Client::context(const Request* request) const {
  ErrorContext where;
  where.rank = options_.rank;
  if (request) {
    where.op = opName(request->op);
    if (request->keys.size() == 1) where.key = request->keys[0];
  }
  return where;
}

Client::~Client() {
  for (int fd : idle_) ::close(fd);
}

int Client::borrow() {
  {
    MutexLock lock(&idleMutex_);
    if (!idle_.empty()) {
      const int fd = idle_.back();
      idle_.pop_back();
      return fd;
    }
  }
  return connectWithRetry();
}

void Client::giveBack(int fd) {
  MutexLock lock(&idleMutex_);
  idle_.push_back(fd);
}

void Client::reportLaunch(LaunchEvent event, Clock::time_point start, const std::string& text,
                          const std::string& hint) const {
  if (!options_.reportLaunch) return;
  LaunchReport r;
  r.event = event;
  r.where = where_;
  r.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  r.code = event == LaunchEvent::StoreGaveUp ? errorCodeName(ErrorCode::Store) : "";
  r.text = text;
  r.hint = hint;
  options_.reportLaunch(r);
}

// Exponential backoff with jitter, so hundreds of ranks starting together do not
// reconnect in lockstep.
int Client::connectWithRetry() {
  const auto start = Clock::now();
  const bool reached = reached_.load(std::memory_order_acquire);
  const auto deadline = start + options_.timeout;
  // A server that served us and now refuses connections has exited: give up sooner.
  const auto refusedDeadline = start + std::min(options_.timeout, kReconnectWindow);
  auto nextReport = start + options_.progressEvery;
  bool reported = false;
  auto waited = [&] {
    char text[32];
    std::snprintf(text, sizeof text, "%.1fs", std::chrono::duration<double>(Clock::now() - start).count());
    return std::string(text);
  };
  std::mt19937 rng(std::random_device{}());
  auto delay = std::chrono::milliseconds(10);
  int attempts = 0;
  std::string error;
  int fd = -1;
  bool refused = false;
  while (true) {
    ++attempts;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    TcpConnectResult attempt = connectTcp(options_.host, options_.port, std::max(left, std::chrono::milliseconds(1)));
    fd = attempt.fd;
    error = std::move(attempt.error);
    refused = attempt.refused;
    if (fd >= 0) break;
    if (reached && refused && Clock::now() + delay > refusedDeadline)
      raise(ErrorCode::Store, context(),
            "the store at " + where_ + " served this client before and now refuses connections (" + error +
                "): its server has exited",
            "The store server (rank 0, or `commhost store serve`) died; check its log and restart the job");
    if (Clock::now() + delay > deadline) {
      const std::string message = "cannot connect to the store at " + where_ + " after " + std::to_string(attempts) +
                                  " attempts over " + formatDuration(options_.timeout) + " (" + error + ")";
      const std::string hint =
          "Check that rank 0 (serve: auto) or `commhost store serve` is running there, and the store host/port "
          "(MASTER_ADDR/MASTER_PORT)";
      reportLaunch(LaunchEvent::StoreGaveUp, start, message, hint);
      raise(ErrorCode::Store, context(), message, hint);
    }
    if (!reached && options_.logger && options_.progressEvery.count() > 0 && Clock::now() >= nextReport) {
      // The logger names the rank, for people; `commhost run` takes the report.
      const std::string hint =
          "Check that rank 0 (serve: auto) or `commhost store serve` is running there and that this host can reach it "
          "(MASTER_ADDR/MASTER_PORT, store.options.host/port, firewall)";
      options_.logger->warn("still waiting for the store at " + where_ + " after " + waited() + " (" + error +
                            "); giving up after " + formatDuration(options_.timeout) + ". " + hint);
      reportLaunch(LaunchEvent::StoreWaiting, start, error, hint);
      reported = true;
      while (nextReport <= Clock::now()) nextReport += options_.progressEvery;
    }
    std::uniform_real_distribution<double> jitter(0.75, 1.25);
    std::this_thread::sleep_for(std::chrono::milliseconds(static_cast<int64_t>(delay.count() * jitter(rng))));
    delay = std::min(delay * 2, std::chrono::milliseconds(1000));
  }
  if (reported) {
    options_.logger->warn("reached the store at " + where_ + " after " + waited());
    reportLaunch(LaunchEvent::StoreReached, start, "", "");
  }
  handshake(fd);
  reached_.store(true, std::memory_order_release);
  return fd;
}

// Every connection starts with an auth frame (an empty token when there is none), so a
// server that turns the connection away says why here, before any call depends on it:
// a wrong or missing token, or max_connections reached.
void Client::handshake(int fd) {
  Request auth;
  auth.op = Op::Auth;
  auth.token = options_.token;
  const auto frame = encodeRequest(auth);
  // A refused connection may already be reset when the auth frame goes out; the
  // server's reason may still be waiting to be read, so read even after a failed write.
  const std::string sendProblem = writeAll(fd, frame.data(), frame.size());
  std::vector<uint8_t> answer;
  std::string problem;
  try {
    problem = readFrame(fd, answer, options_.maxFrame, Clock::now() + options_.timeout);
  } catch (const ProtocolError& e) {
    problem = std::string("it does not speak the commhost store protocol: ") + e.what();
  }
  if (problem.empty()) {
    const auto status = static_cast<Status>(answer[kHeaderSize]);
    if (status == Status::Ok) return;
    ::close(fd);
    std::string reason;
    try {
      reason = FrameReader(answer.data() + kHeaderSize + 1, answer.size() - kHeaderSize - 1).str();
    } catch (const ProtocolError& e) {
      reason = std::string("an unreadable reason: ") + e.what();
    }
    raise(ErrorCode::Store, context(), "the store at " + where_ + " refused this client: " + reason);
  }
  ::close(fd);
  if (!sendProblem.empty()) problem = sendProblem + "; then " + problem;
  // A commhost server answers every handshake it turns away (a token, its connection
  // limit) with the reason: a connection closed with no answer means the server went away.
  raise(ErrorCode::Store, context(),
        "the store server at " + where_ +
            " went away: it closed the connection during the handshake without an "
            "answer (" +
            problem + ")",
        "Check that the store server (rank 0's process, or `commhost store serve`) is still running, and its log "
        "for why it stopped; or that this address is a commhost store at all (a torch job's MASTER_PORT is "
        "torch's own TCPStore)");
}

void Client::lost(const Request& request, const std::string& what) {
  raise(ErrorCode::Store, context(&request), "store at " + where_ + " failed: " + what,
        "The store server (rank 0, or `commhost store serve`) may have exited or dropped this client; check its "
        "log");
}

std::vector<uint8_t> Client::call(const Request& request, std::chrono::milliseconds serverWait) {
  const std::vector<uint8_t> frame = encodeRequest(request);
  if (frame.size() - kHeaderSize > options_.maxFrame)
    raise(ErrorCode::InvalidArgument, context(&request),
          "request of " + std::to_string(frame.size()) + " bytes to the store at " + where_ +
              " is over the frame limit of " + std::to_string(options_.maxFrame),
          "Store smaller values, or raise the store option max_frame on every rank and the server");
  const int fd = borrow();
  std::vector<uint8_t> answer;
  std::string problem = writeAll(fd, frame.data(), frame.size());
  try {
    // Saturate: a huge serverWait must not overflow the deadline.
    const auto wait = std::min<std::chrono::milliseconds>(serverWait, std::chrono::hours(24 * 365));
    if (problem.empty()) problem = readFrame(fd, answer, options_.maxFrame, Clock::now() + wait + kNetworkGrace);
  } catch (const ProtocolError& e) {
    problem = std::string("malformed answer: ") + e.what();
  }
  if (!problem.empty()) {
    ::close(fd);  // the exchange broke off midway: this connection is out of step
    lost(request, problem);
  }
  giveBack(fd);
  const auto status = static_cast<Status>(answer[kHeaderSize]);
  if (status == Status::Ok) return answer;
  FrameReader in(answer.data() + kHeaderSize + 1, answer.size() - kHeaderSize - 1);
  if (status == Status::Timeout) {
    std::string missing;
    for (const auto& k : in.strings()) missing += (missing.empty() ? "'" : ", '") + k + "'";
    raise(ErrorCode::Timeout, context(&request),
          "store at " + where_ + " timed out after " + formatDuration(serverWait) + "; keys not set: " + missing,
          "The rank that sets them may have failed or not reached this point");
  }
  raise(ErrorCode::Store, context(&request), "store at " + where_ + " failed: " + in.str());
}

namespace {
Request request(Op op, std::vector<std::string> keys = {}, std::vector<Bytes> values = {}) {
  Request r;
  r.op = op;
  r.keys = std::move(keys);
  r.values = std::move(values);
  return r;
}
uint64_t ms(std::chrono::milliseconds d) { return static_cast<uint64_t>(std::max<int64_t>(d.count(), 0)); }
}  // namespace

// Runs one request; `in` reads the answer after the status.
#define COMMHOST_CALL(req, wait)                       \
  const std::vector<uint8_t> answer = call(req, wait); \
  [[maybe_unused]] FrameReader in(answer.data() + kHeaderSize + 1, answer.size() - kHeaderSize - 1)

void Client::set(const std::string& key, const Bytes& value) {
  COMMHOST_CALL(request(Op::Set, {key}, {value}), timeout_);
}

Bytes Client::get(const std::string& key) {
  Request r = request(Op::Get, {key});
  r.timeoutMs = ms(timeout_);
  COMMHOST_CALL(r, timeout_);
  return in.bytes();
}

int64_t Client::add(const std::string& key, int64_t delta) {
  Request r = request(Op::Add, {key});
  r.delta = delta;
  COMMHOST_CALL(r, timeout_);
  return static_cast<int64_t>(in.u64());
}

Bytes Client::compareSet(const std::string& key, const Bytes& expected, const Bytes& desired) {
  COMMHOST_CALL(request(Op::CompareSet, {key}, {expected, desired}), timeout_);
  return in.bytes();
}

void Client::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  Request r = request(Op::Wait, keys);
  r.timeoutMs = ms(timeout);
  COMMHOST_CALL(r, timeout);
}

bool Client::check(const std::vector<std::string>& keys) {
  COMMHOST_CALL(request(Op::Check, keys), timeout_);
  return in.u8() != 0;
}

bool Client::deleteKey(const std::string& key) {
  COMMHOST_CALL(request(Op::Delete, {key}), timeout_);
  return in.u8() != 0;
}

int64_t Client::numKeys() {
  COMMHOST_CALL(request(Op::NumKeys), timeout_);
  return static_cast<int64_t>(in.u64());
}

std::vector<Bytes> Client::multiGet(const std::vector<std::string>& keys) {
  Request r = request(Op::MultiGet, keys);
  r.timeoutMs = ms(timeout_);
  COMMHOST_CALL(r, timeout_);
  std::vector<Bytes> values(in.u64());
  for (auto& v : values) v = in.bytes();
  return values;
}

void Client::multiSet(const std::vector<std::string>& keys, const std::vector<Bytes>& values) {
  if (keys.size() != values.size())
    throw InvalidArgument("multiSet got " + std::to_string(keys.size()) + " keys but " + std::to_string(values.size()) +
                          " values");
  COMMHOST_CALL(request(Op::MultiSet, keys, values), timeout_);
}

void Client::append(const std::string& key, const Bytes& value) {
  COMMHOST_CALL(request(Op::Append, {key}, {value}), timeout_);
}

void Client::ping() { COMMHOST_CALL(request(Op::Ping), timeout_); }

#undef COMMHOST_CALL

}  // namespace commhost::tcpstore
