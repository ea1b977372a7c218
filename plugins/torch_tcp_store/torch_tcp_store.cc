// SPDX-License-Identifier: Apache-2.0
#include "torch_tcp_store.h"

#include "commhost/errors.h"

namespace commhost::torchtcp {

OptionSchema<Options> Options::schema() {
  return OptionSchema<Options>()
      .option("host", &Options::host, "", "torch's TCPStore server address; empty: MASTER_ADDR, else 127.0.0.1")
      .option("port", &Options::port, "0", "torch's TCPStore server port; 0: MASTER_PORT", {0, 65535})
      .choice("protocol", &Options::protocol, "auto",
              "The server's torch generation: auto asks it once (a 1.x server answers a GETNUMKEYS, a 2.x one "
              "closes a connection that does not open with VALIDATE); 1 or 2 to skip the probe",
              {{"auto", ProtocolChoice::Auto}, {"1", ProtocolChoice::Torch1}, {"2", ProtocolChoice::Torch2}})
      .option("timeout", &Options::timeout, "5m", "Connect and wait timeout of store calls", {0.001, 86400});
}

std::shared_ptr<Store> create(const Options& options, const StoreContext& ctx) {
  std::string host = options.host.empty() ? ctx.masterAddr : options.host;
  if (host.empty() || host == "0.0.0.0") host = "127.0.0.1";
  const int port = options.port ? options.port : ctx.masterPort;
  const std::string who = ctx.rank >= 0 ? "rank " + std::to_string(ctx.rank) : "client";
  if (port == 0)
    throw ConfigError("[" + who +
                      "] torch_tcp store: no port to connect to; set MASTER_PORT (torchrun does) or "
                      "store.options.port to the port of the job's torch TCPStore");
  return std::make_shared<TorchTcpStore>(host, port, options.protocol, options.timeout, who);
}

TorchTcpStore::TorchTcpStore(std::string host, int port, ProtocolChoice protocol, std::chrono::milliseconds timeout,
                             std::string who)
    : StoreBase(timeout), host_(std::move(host)), port_(port), who_(std::move(who)) {
  if (protocol == ProtocolChoice::Torch1) protocol_ = Protocol::Torch1;
  if (protocol == ProtocolChoice::Auto) protocol_ = detect(deadline(timeout));
}

Deadline TorchTcpStore::deadline(std::chrono::milliseconds timeout) const {
  return std::chrono::steady_clock::now() + timeout;
}

std::string TorchTcpStore::what(const std::string& op, const std::string& key) const {
  return "[" + who_ + "] " + op + (key.empty() ? "" : " of key '" + key + "'");
}

Protocol TorchTcpStore::detect(Deadline deadline) {
  const std::string what = this->what("protocol probe", "");
  auto c = std::make_unique<Connection>(host_, port_, deadline);
  c->send(std::string(1, static_cast<char>(kProbeByte)), deadline, what);
  int64_t keys = 0;
  if (!c->recvExact(&keys, sizeof keys, deadline, what)) return Protocol::Torch2;
  MutexLock lock(&mu_);
  idle_.push_back(std::move(c));  // a 1.x GETNUMKEYS answered in full: the stream is in step
  return Protocol::Torch1;
}

std::unique_ptr<Connection> TorchTcpStore::borrow(Deadline deadline, const std::string& what) {
  {
    MutexLock lock(&mu_);
    if (!idle_.empty()) {
      auto c = std::move(idle_.back());
      idle_.pop_back();
      return c;
    }
  }
  auto c = std::make_unique<Connection>(host_, port_, deadline);
  if (protocol_ == Protocol::Torch2)
    c->send(Message(protocol_, Query::Validate).u32(kValidateMagic).data(), deadline, what);
  return c;
}

template <class F> auto TorchTcpStore::call(const std::string& what, Deadline deadline, F&& fn) {
  auto c = borrow(deadline, what);
  if constexpr (std::is_void_v<decltype(fn(*c))>) {
    fn(*c);
    MutexLock lock(&mu_);
    idle_.push_back(std::move(c));
  } else {
    auto result = fn(*c);
    MutexLock lock(&mu_);
    idle_.push_back(std::move(c));
    return result;
  }
}

void TorchTcpStore::set(const std::string& key, const Bytes& value) {
  const std::string w = what("set", key);
  const Deadline d = deadline(timeout_);
  call(w, d, [&](Connection& c) { c.send(Message(protocol_, Query::Set).key(key).bytes(value).data(), d, w); });
}

Bytes TorchTcpStore::get(const std::string& key) {
  wait({key}, timeout_);  // a GET of a key the server lacks makes it drop the connection
  const std::string w = what("get", key);
  const Deadline d = deadline(timeout_);
  return call(w, d, [&](Connection& c) {
    c.send(Message(protocol_, Query::Get).key(key).data(), d, w);
    return c.recvBytes(d, w);
  });
}

int64_t TorchTcpStore::add(const std::string& key, int64_t delta) {
  const std::string w = what("add", key);
  const Deadline d = deadline(timeout_);
  try {
    return call(w, d, [&](Connection& c) {
      c.send(Message(protocol_, Query::Add).key(key).i64(delta).data(), d, w);
      return c.recvI64(d, w);
    });
  } catch (const StoreError& e) {
    // torch's server drops the connection when the value does not parse as an integer.
    if (check({key}))
      throw StoreError(w + ": torch's TCPStore refused it; the value at '" + key +
                       "' is likely not an integer (add() keeps a decimal counter there). Next: use another key for "
                       "the counter (" +
                       e.what() + ")");
    throw;
  }
}

Bytes TorchTcpStore::compareSet(const std::string& key, const Bytes& expected, const Bytes& desired) {
  const std::string w = what("compare_set", key);
  const Deadline d = deadline(timeout_);
  return call(w, d, [&](Connection& c) {
    c.send(Message(protocol_, Query::CompareSet).key(key).bytes(expected).bytes(desired).data(), d, w);
    return c.recvBytes(d, w);
  });
}

void TorchTcpStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  const std::string w = what("wait", keys.size() == 1 ? keys.front() : "");
  const Deadline d = deadline(timeout);
  Message m(protocol_, Query::Wait);
  m.u64(keys.size());
  for (const auto& k : keys) m.key(k);
  uint8_t answer = 0;
  try {
    answer = call(w, d, [&](Connection& c) {
      c.send(m.data(), d, w);
      return c.recvU8(d, w);
    });
  } catch (const TimeoutError&) {
    std::string missing;
    for (const auto& k : keys)
      if (!check({k})) missing += (missing.empty() ? "'" : ", '") + k + "'";
    throw TimeoutError("[" + who_ + "] wait: key(s) " + missing + " not set in torch's TCPStore at " + host_ + ":" +
                       std::to_string(port_) + " within " + std::to_string(timeout.count()) +
                       " ms. Next: check the ranks that should set them (their logs), or raise the timeout");
  }
  if (answer != 0)
    throw StoreError(w + ": torch's TCPStore at " + host_ + ":" + std::to_string(port_) + " answered " +
                     std::to_string(answer) + " instead of 'keys ready'");
}

bool TorchTcpStore::check(const std::vector<std::string>& keys) {
  const std::string w = what("check", keys.empty() ? "" : keys.front());
  const Deadline d = deadline(timeout_);
  Message m(protocol_, Query::Check);
  m.u64(keys.size());
  for (const auto& k : keys) m.key(k);
  return call(w, d, [&](Connection& c) {
           c.send(m.data(), d, w);
           return c.recvU8(d, w);
         }) == 0;
}

bool TorchTcpStore::deleteKey(const std::string& key) {
  const std::string w = what("delete", key);
  const Deadline d = deadline(timeout_);
  return call(w, d, [&](Connection& c) {
           c.send(Message(protocol_, Query::DeleteKey).key(key).data(), d, w);
           return c.recvI64(d, w);
         }) > 0;
}

int64_t TorchTcpStore::numKeys() {
  const std::string w = what("num_keys", "");
  const Deadline d = deadline(timeout_);
  return call(w, d, [&](Connection& c) {
    c.send(Message(protocol_, Query::GetNumKeys).data(), d, w);
    return c.recvI64(d, w);
  });
}

void TorchTcpStore::append(const std::string& key, const Bytes& value) {
  if (protocol_ == Protocol::Torch2) {
    const std::string w = what("append", key);
    const Deadline d = deadline(timeout_);
    call(w, d, [&](Connection& c) { c.send(Message(protocol_, Query::Append).key(key).bytes(value).data(), d, w); });
    return;
  }
  Bytes current = check({key}) ? get(key) : Bytes{};
  for (;;) {
    Bytes desired = current;
    desired.insert(desired.end(), value.begin(), value.end());
    const Bytes stored = compareSet(key, current, desired);
    if (stored == desired) return;
    // torch answers `expected` itself when the key is absent (a present key equal to it
    // would have become `desired`): it was deleted meanwhile, so append to nothing.
    // Otherwise another writer came first: append to what it wrote.
    current = stored == current ? Bytes{} : stored;
  }
}

}  // namespace commhost::torchtcp
