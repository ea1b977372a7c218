// SPDX-License-Identifier: Apache-2.0
// The etcd store's options, and creating a store from them.
#include <algorithm>

#include "commhost/errors.h"
#include "etcd_store.h"

namespace commhost::etcdstore {

OptionSchema<Options> Options::schema() {
  return OptionSchema<Options>()
      .option("endpoint", &Options::endpoint, "",
              "etcd client address, host:port (or host, with `port`); empty: MASTER_ADDR (else 127.0.0.1) with `port`")
      .option("port", &Options::port, "2379", "etcd client port, when `endpoint` names none", {1, 65535})
      .option("prefix", &Options::prefix, "commhost/",
              "Put before every key; give each job its own (e.g. commhost/JOB/) so jobs sharing an etcd stay apart")
      .option("lease_ttl_s", &Options::leaseTtlSeconds, "10",
              "TTL in seconds of the lease that lease keys are put on: they vanish this long after their process died",
              {1, 3600})
      .option("lease_keys", &Options::leaseKeys, "supervisor/heartbeat/",
              "A key containing one of these is put on this process's lease (kept alive while it lives); [] for none")
      .option("timeout", &Options::timeout, "0", "Wait timeout of store calls; 0: the job's (group.timeout), else 5m",
              {0, 86400});
}

void Options::validate(const StoreContext& ctx) const {
  if (prefix.empty())
    refuseOption("prefix", "[rank " + std::to_string(ctx.rank) + "] etcd store: the prefix is empty",
                 "set store.options.prefix to one per job, e.g. commhost/JOB/");
  parseEndpoint(endpoint.empty() ? "127.0.0.1" : endpoint, port);
}

Endpoint parseEndpoint(const std::string& text, int defaultPort) {
  Endpoint out;
  std::string host = text;
  std::string port = std::to_string(defaultPort);
  // "[::1]:2379", "host:2379", "host"; a bare IPv6 address has several colons.
  if (!host.empty() && host.front() == '[') {
    const size_t close = host.find(']');
    if (close == std::string::npos) refuseOption("endpoint", "'" + text + "' has no closing ']'");
    if (close + 1 < host.size() && host[close + 1] == ':') port = host.substr(close + 2);
    host = host.substr(1, close - 1);
  } else if (std::count(host.begin(), host.end(), ':') == 1) {
    port = host.substr(host.find(':') + 1);
    host = host.substr(0, host.find(':'));
  }
  if (host.rfind("http://", 0) == 0 || text.find("://") != std::string::npos)
    refuseOption("endpoint", "'" + text + "' is a URL", "give host:port, e.g. 127.0.0.1:2379");
  if (host.empty() || port.empty() || port.find_first_not_of("0123456789") != std::string::npos)
    refuseOption("endpoint", "'" + text + "' is not host:port", "e.g. 127.0.0.1:2379");
  out.host = host;
  out.port = port;
  return out;
}

std::shared_ptr<Store> create(const Options& options, const StoreContext& ctx) {
  Settings s;
  const std::string host = ctx.masterAddr.empty() || ctx.masterAddr == "0.0.0.0" ? "127.0.0.1" : ctx.masterAddr;
  s.endpoint = parseEndpoint(options.endpoint.empty() ? host : options.endpoint, options.port);
  s.prefix = options.prefix;
  s.leaseKeys = options.leaseKeys;
  s.leaseTtlSeconds = options.leaseTtlSeconds;
  s.timeout = options.timeout.count() > 0 ? options.timeout
              : ctx.timeout.count() > 0   ? ctx.timeout
                                          : std::chrono::minutes(5);
  s.rank = ctx.rank;
  s.logger = ctx.logger;
  auto store = std::make_shared<EtcdStore>(std::move(s));
  if (ctx.logger) ctx.logger->debug("etcd store at " + store->endpoint().text() + ", prefix '" + options.prefix + "'");
  return store;
}

}  // namespace commhost::etcdstore
