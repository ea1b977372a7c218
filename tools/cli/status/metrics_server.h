// SPDX-License-Identifier: Apache-2.0
// MetricsServer: the HTTP endpoint of `commhost run --metrics HOST:PORT`. GET /metrics
// answers the job's metrics in Prometheus' text format, GET /status.json the ranks'
// records (commhost/job_status.h), both read from the job's store by `source`.
//
// Threading: its own thread runs every connection (Boost.Asio, one io_context); `source`
// runs there. Each connection has a deadline (kRequestDeadline for the request, as much
// for the answer) and a request is at most 8 KiB: a client that stalls or sends garbage
// costs one socket until its deadline, never the launcher's thread or the ranks.
//
// Authentication: with a token (the job's store token), every request must carry it, as
// `Authorization: Bearer TOKEN` (what Prometheus sends with `authorization: {credentials:
// TOKEN}`) or as `?token=TOKEN` (a browser's address bar; the dashboard page passes it on
// to its own requests); others get 401. The token is compared in constant time and never
// written into an answer.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

namespace commhost::cli {

class MetricsServer {
 public:
  static constexpr std::chrono::seconds kRequestDeadline{5};
  // Returns the body for a path ("/metrics", "/status.json") and sets its content type;
  // "" for a path it does not serve. Throws to answer 503 with the message.
  using Source = std::function<std::string(const std::string& path, std::string& contentType)>;
  // Binds HOST:PORT (port 0: any free one) and starts serving; throws InvalidArgument
  // naming the address when it cannot bind. `token` empty: no authentication.
  MetricsServer(const std::string& host, int port, Source source, std::string token = "");
  ~MetricsServer();  // stops serving and joins the thread
  int port() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace commhost::cli
