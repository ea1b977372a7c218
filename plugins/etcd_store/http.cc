// SPDX-License-Identifier: Apache-2.0
#include "http.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <exception>
#include <limits>

namespace commhost::etcdstore {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using boost::system::error_code;

// etcd's answer (or one message of a stream) as JSON; an error answer as EtcdError.
nlohmann::json answer(const Endpoint& endpoint, unsigned status, const std::string& body) {
  nlohmann::json out = nlohmann::json::parse(body, nullptr, false);
  if (out.is_discarded())
    throw CallFailed("etcd at " + endpoint.text() + " answered HTTP " + std::to_string(status) +
                         " with something that is not JSON: '" + body.substr(0, 200) + "'",
                     false);
  // Unary calls: {"error": "...", "code": N, "message": "..."} (etcd 3.4), or without
  // "error" (3.5, with an HTTP status such as 429 for a request over the size limit);
  // streams wrap it in an object.
  const bool grpcError = status != 200 && out.is_object() && out.contains("code") && out.contains("message");
  if (out.contains("error") || grpcError) {
    const nlohmann::json& e = out.contains("error") && out["error"].is_object() ? out["error"] : out;
    std::string message = e.value("message", std::string());
    if (message.empty() && out.contains("error") && out["error"].is_string()) message = out["error"].get<std::string>();
    throw EtcdError(message, e.value("code", e.value("grpc_code", 0)));
  }
  if (status != 200)
    throw CallFailed(
        "etcd at " + endpoint.text() + " answered HTTP " + std::to_string(status) + ": '" + body.substr(0, 200) + "'",
        false);
  return out;
}

// One request and its answer on a fresh connection; every step bounded by the deadline.
class Exchange {
 public:
  Exchange(const Endpoint& endpoint, Clock::time_point deadline)
      : endpoint_(endpoint), deadline_(deadline), stream_(ioc_) {}

  void send(const std::string& path, const nlohmann::json& body) {
    tcp::resolver resolver(ioc_);
    error_code ec;
    const auto addresses = resolver.resolve(endpoint_.host, endpoint_.port, ec);
    if (ec) throw ConnectFailed("cannot resolve '" + endpoint_.host + "': " + ec.message());
    stream_.expires_at(deadline_);
    stream_.async_connect(addresses, [&](error_code e, const tcp::endpoint&) { ec = e; });
    run();
    if (ec) throw ConnectFailed(ec == beast::error::timeout ? "the deadline passed while connecting" : ec.message());
    request_ = {http::verb::post, path, 11};
    request_.set(http::field::host, endpoint_.text());
    request_.set(http::field::content_type, "application/json");
    request_.body() = body.dump();
    request_.prepare_payload();
    stream_.expires_at(deadline_);
    http::async_write(stream_, request_, [&](error_code e, std::size_t) { ec = e; });
    run();
    // A request not fully written is not processed (its length is in the header): safe to retry.
    if (ec) throw ConnectFailed("sending the request failed: " + ec.message());
  }

  nlohmann::json readAll() {
    parser_.body_limit((std::numeric_limits<std::uint64_t>::max)());  // etcd bounds what it sends
    error_code ec;
    stream_.expires_at(deadline_);
    http::async_read(stream_, buffer_, parser_, [&](error_code e, std::size_t) { ec = e; });
    run();
    if (ec) fail("reading the answer", ec);
    return answer(endpoint_, parser_.get().result_int(), parser_.get().body());
  }

  bool readStream(const std::function<bool(const nlohmann::json&)>& onMessage) {
    parser_.body_limit((std::numeric_limits<std::uint64_t>::max)());
    error_code ec;
    stream_.expires_at(deadline_);
    http::async_read_header(stream_, buffer_, parser_, [&](error_code e, std::size_t) { ec = e; });
    run();
    if (ec == beast::error::timeout) return false;
    if (ec) fail("reading the stream's header", ec);
    if (parser_.get().result_int() != 200) return readAll().is_null();  // throws the error etcd sent
    std::string pending;
    bool stopped = false;
    std::exception_ptr error;  // from onMessage: never thrown through Beast's callback
    // Beast keeps a reference to the callback: it lives in this frame, as long as the reads.
    auto onChunk = [&](std::uint64_t, beast::string_view data, error_code&) -> std::size_t {
      pending.append(data.data(), data.size());
      for (size_t nl; !stopped && (nl = pending.find('\n')) != std::string::npos;) {
        const std::string line = pending.substr(0, nl);
        pending.erase(0, nl + 1);
        if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
        try {
          stopped = !onMessage(answer(endpoint_, 200, line));
        } catch (...) {
          error = std::current_exception();
          stopped = true;
        }
      }
      return data.size();
    };
    parser_.on_chunk_body(onChunk);
    while (!stopped && !parser_.is_done()) {
      stream_.expires_at(deadline_);
      http::async_read_some(stream_, buffer_, parser_, [&](error_code e, std::size_t) { ec = e; });
      run();
      if (error) std::rethrow_exception(error);
      if (ec == beast::error::timeout) return false;
      if (ec) fail("reading the stream", ec);
    }
    if (error) std::rethrow_exception(error);
    if (!stopped) throw CallFailed("etcd at " + endpoint_.text() + " ended the stream", false);
    return true;
  }

 private:
  void run() {
    ioc_.restart();
    ioc_.run();
  }
  [[noreturn]] void fail(const char* doing, const error_code& ec) {
    const bool timedOut = ec == beast::error::timeout;
    throw CallFailed(timedOut ? std::string("the deadline passed while ") + doing
                              : std::string("the connection failed while ") + doing + ": " + ec.message(),
                     timedOut);
  }

  const Endpoint& endpoint_;
  const Clock::time_point deadline_;
  asio::io_context ioc_;
  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  http::request<http::string_body> request_;
  http::response_parser<http::string_body> parser_;
};

}  // namespace

nlohmann::json post(const Endpoint& endpoint, const std::string& path, const nlohmann::json& body,
                    Clock::time_point deadline) {
  Exchange exchange(endpoint, deadline);
  exchange.send(path, body);
  return exchange.readAll();
}

bool stream(const Endpoint& endpoint, const std::string& path, const nlohmann::json& body, Clock::time_point deadline,
            const std::function<bool(const nlohmann::json&)>& onMessage) {
  Exchange exchange(endpoint, deadline);
  exchange.send(path, body);
  return exchange.readStream(onMessage);
}

}  // namespace commhost::etcdstore
