// SPDX-License-Identifier: Apache-2.0
// HTTP/1.1 POSTs of JSON to etcd's gRPC gateway (Boost.Beast), each bounded by a deadline.
//
// One connection per call, on its own io_context, owned by the calling thread: a call
// never waits behind another thread's, a dead server is noticed at connect, and no stale
// keep-alive connection has to be retried (retrying a txn whose answer was lost could
// apply it twice). The three exceptions below tell the caller whether the request can
// have reached etcd, so it knows what is safe to retry.
#pragma once

#include <chrono>
#include <functional>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

namespace commhost::etcdstore {

using Clock = std::chrono::steady_clock;

// Where etcd answers: "host:port" as given, split.
struct Endpoint {
  std::string host;
  std::string port;
  std::string text() const { return host + ":" + port; }
};

// The request never reached etcd (refused, unreachable, name not resolved, or the
// deadline passed while connecting): safe to retry.
class ConnectFailed : public std::runtime_error {
  using std::runtime_error::runtime_error;
};
// The connection failed after the request was sent, or the deadline passed waiting for
// the answer, or the answer was not what etcd sends: the request's outcome is unknown.
class CallFailed : public std::runtime_error {
 public:
  CallFailed(const std::string& what, bool timedOut) : std::runtime_error(what), timedOut_(timedOut) {}
  bool timedOut() const { return timedOut_; }

 private:
  bool timedOut_;
};
// etcd answered with an error ({"error", "code", "message"}; code is a gRPC status).
class EtcdError : public std::runtime_error {
 public:
  EtcdError(const std::string& what, int code) : std::runtime_error(what), code_(code) {}
  int code() const { return code_; }

 private:
  int code_;
};

// POSTs `body` to `path` ("/v3/kv/range") and returns the parsed answer.
nlohmann::json post(const Endpoint& endpoint, const std::string& path, const nlohmann::json& body,
                    Clock::time_point deadline);

// A streaming POST (/v3/watch): calls `onMessage` with every newline-separated JSON
// object of the answer, as it arrives, until it returns false (then returns true) or the
// deadline passes (then returns false). Throws as post() does, also when the stream ends.
bool stream(const Endpoint& endpoint, const std::string& path, const nlohmann::json& body, Clock::time_point deadline,
            const std::function<bool(const nlohmann::json&)>& onMessage);

}  // namespace commhost::etcdstore
