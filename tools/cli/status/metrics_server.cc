// SPDX-License-Identifier: Apache-2.0
#include "metrics_server.h"

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cctype>
#include <thread>

#include "commhost/errors.h"

namespace commhost::cli {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

// Equal in time that does not depend on where they differ (only on the lengths).
bool sameSecret(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

// A query value as the browser sent it: %XX and '+' decoded.
std::string percentDecoded(const std::string& in) {
  std::string out;
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] == '+') {
      out += ' ';
    } else if (in[i] == '%' && i + 2 < in.size() && std::isxdigit(static_cast<unsigned char>(in[i + 1])) &&
               std::isxdigit(static_cast<unsigned char>(in[i + 2]))) {
      out += static_cast<char>(std::stoi(in.substr(i + 1, 2), nullptr, 16));
      i += 2;
    } else {
      out += in[i];
    }
  }
  return out;
}

// One connection: read one request, answer it, close.
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, const MetricsServer::Source& source, const std::string& token)
      : stream_(std::move(socket)), source_(source), token_(token) {
    parser_.header_limit(8 * 1024);
    parser_.body_limit(0);
  }
  void start() {
    stream_.expires_after(MetricsServer::kRequestDeadline);
    http::async_read(stream_, buffer_, parser_, [self = shared_from_this()](beast::error_code ec, size_t) {
      if (!ec) self->answer();
    });
  }

 private:
  void answer() {
    const auto& req = parser_.get();
    res_.version(req.version());
    res_.keep_alive(false);
    res_.set(http::field::server, "commhost");
    std::string type = "text/plain; charset=utf-8";
    if (req.method() != http::verb::get) {
      res_.result(http::status::method_not_allowed);
      res_.body() = "only GET is served\n";
    } else if (!authorized(req)) {
      res_.result(http::status::unauthorized);
      res_.set(http::field::www_authenticate, "Bearer realm=\"commhost\"");
      res_.body() =
          "this endpoint needs the job's store token: send `Authorization: Bearer TOKEN` (Prometheus: "
          "authorization: {credentials: TOKEN}), or open the page with ?token=TOKEN\n";
    } else {
      try {
        const std::string path(req.target().substr(0, req.target().find('?')));
        std::string body = source_(path, type);
        res_.result(body.empty() ? http::status::not_found : http::status::ok);
        res_.body() = body.empty() ? "served here: /metrics (Prometheus), /status.json\n" : std::move(body);
      } catch (const std::exception& e) {
        res_.result(http::status::service_unavailable);
        res_.body() = std::string(e.what()) + "\n";
      }
    }
    res_.set(http::field::content_type, type);
    res_.prepare_payload();
    stream_.expires_after(MetricsServer::kRequestDeadline);
    http::async_write(stream_, res_, [self = shared_from_this()](beast::error_code, size_t) {
      beast::error_code ignored;
      self->stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    });
  }

  // Whether the request carries the token (or none is needed).
  bool authorized(const http::request<http::empty_body>& req) const {
    if (token_.empty()) return true;
    const std::string bearer = "Bearer ";
    const auto header = req[http::field::authorization];
    if (header.size() > bearer.size() && header.substr(0, bearer.size()) == bearer &&
        sameSecret(std::string(header.substr(bearer.size())), token_))
      return true;
    const std::string target(req.target());
    const size_t q = target.find('?');
    if (q == std::string::npos) return false;
    for (size_t at = q + 1; at < target.size();) {
      size_t end = target.find('&', at);
      if (end == std::string::npos) end = target.size();
      const std::string pair = target.substr(at, end - at);
      if (pair.rfind("token=", 0) == 0 && sameSecret(percentDecoded(pair.substr(6)), token_)) return true;
      at = end + 1;
    }
    return false;
  }

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  http::request_parser<http::empty_body> parser_;
  http::response<http::string_body> res_;
  const MetricsServer::Source& source_;
  const std::string& token_;
};

}  // namespace

struct MetricsServer::Impl {
  asio::io_context ioc;
  tcp::acceptor acceptor{ioc};
  Source source;
  std::string token;  // empty: none needed
  std::thread thread;

  void accept() {
    acceptor.async_accept([this](beast::error_code ec, tcp::socket socket) {
      if (ec == asio::error::operation_aborted) return;
      if (!ec) std::make_shared<Session>(std::move(socket), source, token)->start();
      accept();
    });
  }
};

MetricsServer::MetricsServer(const std::string& host, int port, Source source, std::string token)
    : impl_(std::make_unique<Impl>()) {
  impl_->source = std::move(source);
  impl_->token = std::move(token);
  beast::error_code ec;
  const auto address = asio::ip::make_address(host, ec);
  if (ec)
    throw InvalidArgument("--metrics " + host + ":" + std::to_string(port) + ": '" + host +
                          "' is not an IP address (give 127.0.0.1, 0.0.0.0 or an interface's address)");
  const tcp::endpoint endpoint(address, static_cast<unsigned short>(port));
  auto& a = impl_->acceptor;
  a.open(endpoint.protocol(), ec);
  if (!ec) a.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) a.bind(endpoint, ec);
  if (!ec) a.listen(asio::socket_base::max_listen_connections, ec);
  if (ec)
    throw InvalidArgument("--metrics " + host + ":" + std::to_string(port) + ": cannot listen there (" + ec.message() +
                          "); give a free port, or 0 for any");
  impl_->accept();
  impl_->thread = std::thread([this] { impl_->ioc.run(); });
}

MetricsServer::~MetricsServer() {
  impl_->ioc.stop();
  impl_->thread.join();
}

int MetricsServer::port() const { return impl_->acceptor.local_endpoint().port(); }

}  // namespace commhost::cli
