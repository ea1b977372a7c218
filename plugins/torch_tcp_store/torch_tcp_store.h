// SPDX-License-Identifier: Apache-2.0
// The `torch_tcp` store: a commhost Store that is a client of torch's own TCPStore server
// (the store torchrun's agent or a torch script's rank 0 hosts at MASTER_ADDR:MASTER_PORT),
// speaking torch 1.x's or 2.x's wire protocol (wire.h). With it, `commhost status`,
// `top` and `trace dump` read a torch job's store, where the torch bridge publishes its
// status records, and commhost ranks may rendezvous through a torch-hosted store.
// Keys are torch's: "k" here is the "k" a torch script sets on the same TCPStore.
//
// Threading: shared by threads; each call borrows an idle connection or opens one, so a
// thread blocked in wait() does not hold up another's set() (as the tcp store's client).
// Errors: StoreError / TimeoutError naming the op, key, host:port and what to check.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "commhost/mutex.h"
#include "commhost/sdk/plugin.h"
#include "commhost/sdk/typed_options.h"
#include "connection.h"
#include "wire.h"

namespace commhost::torchtcp {

enum class ProtocolChoice { Auto, Torch1, Torch2 };

// The plugin options (schema in torch_tcp_store.cc).
struct Options {
  std::string host;
  int port = 0;
  ProtocolChoice protocol = ProtocolChoice::Auto;
  std::chrono::milliseconds timeout{0};
  static OptionSchema<Options> schema();
};
std::shared_ptr<Store> create(const Options& options, const StoreContext& ctx);

class TorchTcpStore final : public StoreBase {
 public:
  // Connects (until `timeout`) and, with ProtocolChoice::Auto, asks the server which
  // protocol it speaks (wire.h kProbeByte). `who` ("rank 3", "commhost status") starts
  // every error message.
  TorchTcpStore(std::string host, int port, ProtocolChoice protocol, std::chrono::milliseconds timeout,
                std::string who);

  using Store::wait;
  void set(const std::string& key, const Bytes& value) override;
  Bytes get(const std::string& key) override;
  int64_t add(const std::string& key, int64_t delta) override;
  Bytes compareSet(const std::string& key, const Bytes& expected, const Bytes& desired) override;
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  bool check(const std::vector<std::string>& keys) override;
  bool deleteKey(const std::string& key) override;
  int64_t numKeys() override;
  // 2.x: APPEND; 1.x has none: a compare-and-set loop, atomic all the same.
  void append(const std::string& key, const Bytes& value) override;

  Protocol protocol() const { return protocol_; }

 private:
  // Runs `fn` on a borrowed connection, which goes back to the idle list when `fn`
  // returns and is dropped when it throws (its stream is then out of step).
  template <class F> auto call(const std::string& what, Deadline deadline, F&& fn);
  std::unique_ptr<Connection> borrow(Deadline deadline, const std::string& what) EXCLUDES(mu_);
  Protocol detect(Deadline deadline);
  Deadline deadline(std::chrono::milliseconds timeout) const;
  std::string what(const std::string& op, const std::string& key) const;

  const std::string host_;
  const int port_;
  const std::string who_;
  Protocol protocol_ = Protocol::Torch2;  // set once, in the constructor
  Mutex mu_;
  std::vector<std::unique_ptr<Connection>> idle_ GUARDED_BY(mu_);
};

}  // namespace commhost::torchtcp
