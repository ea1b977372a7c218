// SPDX-License-Identifier: Apache-2.0
// The etcd store: the Store API over an etcd v3 cluster, through etcd's JSON gateway
// (HTTP on the client port), for jobs whose rendezvous must outlive any single rank.
//
// Every key of the store is `prefix` + the caller's key, so jobs sharing one etcd keep
// apart by prefix (numKeys() counts the keys under the prefix). add(), compareSet() and
// append() are etcd transactions that compare the key's mod_revision (or that it is
// absent) and retry on a conflict; wait() watches the keys from the revision it last
// read them at, so a set between the read and the watch is not missed.
// Keys containing one of `lease_keys` (by default the supervisor's heartbeat keys) are
// put on a lease that this store keeps alive (lease.h): when the process dies, its
// heartbeat keys vanish one TTL later. add(key, 0) on such a key only reads it, so a rank
// watching a peer's heartbeat never re-creates it on its own lease.
// Errors: StoreError naming the endpoint, the key and what to do; TimeoutError from
// wait()/get() naming the missing keys. While etcd refuses connections a call retries
// with backoff until its timeout; a call whose request reached etcd is never retried
// blindly (its outcome is unknown: it says so).
// Limits: etcd refuses a request over --max-request-bytes (1.5 MiB by default), so a
// value must be under that (base64 makes it 4/3 larger on the wire); a txn holds at most
// --max-txn-ops (128) ops, so multiSet() of more keys is several transactions.
// Threading: every call may come from any thread at once; calls share no connection
// (http.h). Members are set in the constructor and read-only after, but the LeaseKeeper.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "commhost/sdk/plugin.h"
#include "commhost/sdk/typed_options.h"
#include "http.h"
#include "kv.h"
#include "lease.h"

namespace commhost::etcdstore {

struct Settings {
  Endpoint endpoint;
  std::string prefix;
  std::vector<std::string> leaseKeys;  // a key containing one of these is put on the lease
  int leaseTtlSeconds = 10;
  std::chrono::milliseconds timeout{300000};
  int rank = -1;  // for messages; -1: unknown
  std::shared_ptr<Logger> logger;
};

class EtcdStore final : public StoreBase {
 public:
  explicit EtcdStore(Settings settings);
  ~EtcdStore() override;

  using Store::wait;
  void set(const std::string& key, const Bytes& value) override;
  Bytes get(const std::string& key) override;
  int64_t add(const std::string& key, int64_t delta) override;
  Bytes compareSet(const std::string& key, const Bytes& expected, const Bytes& desired) override;
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  bool check(const std::vector<std::string>& keys) override;
  bool deleteKey(const std::string& key) override;
  int64_t numKeys() override;
  std::vector<Bytes> multiGet(const std::vector<std::string>& keys) override;
  void multiSet(const std::vector<std::string>& keys, const std::vector<Bytes>& values) override;
  void append(const std::string& key, const Bytes& value) override;

  const Endpoint& endpoint() const { return s_.endpoint; }

 private:
  // Runs `attempt` (one request) again while etcd cannot be reached, until `deadline`
  // (at least once), then throws StoreError. A request lost after it was sent is retried
  // the same way when it is `idempotent` (a read, a put), else a StoreError at once (a
  // txn that may have applied). EtcdError (etcd's own refusal) passes through.
  template <class Attempt>
  auto retrying(const char* doing, const std::string& subject, Clock::time_point deadline, bool idempotent,
                const Attempt& attempt) -> decltype(attempt(deadline));
  // One unary call through retrying(); etcd's refusal as StoreError.
  nlohmann::json call(const char* doing, const std::string& subject, const std::string& path,
                      const nlohmann::json& body, Clock::time_point deadline, bool idempotent = true);
  // A request that may put lease keys: `build(lease)` makes its body for a lease id (0:
  // none needed). When etcd has dropped the lease, grants a new one and sends it again.
  template <class Build>
  nlohmann::json withLease(const char* doing, const std::string& subject, const std::string& path, bool needsLease,
                           Clock::time_point deadline, bool idempotent, const Build& build);
  void put(const char* doing, const std::string& key, const Bytes& value);
  // A txn: if `compare` holds, put `value` at `key`. Returns nothing when it put; else
  // the key as it is (none: absent).
  std::optional<std::optional<KeyValue>> putIf(const char* doing, const std::string& key, const nlohmann::json& compare,
                                               const Bytes& value);
  std::optional<KeyValue> read(const char* doing, const std::string& key);
  // The keys (caller's names) read in txns of at most kMaxTxnOps; `revision` gets the
  // lowest revision they were read at. Values are left empty when `keysOnly`.
  std::vector<std::optional<KeyValue>> readMany(const char* doing, const std::vector<std::string>& keys, bool keysOnly,
                                                Clock::time_point deadline, int64_t* revision);
  bool isLeaseKey(const std::string& key) const;  // the caller's name
  std::string full(const std::string& key) const { return s_.prefix + key; }
  std::string where(const char* what, const std::string& subject) const;
  [[noreturn]] void refused(const char* doing, const std::string& subject, const EtcdError& e) const;

  const Settings s_;
  LeaseKeeper lease_;
};

// The plugin options (schema in etcd_store.cc).
struct Options {
  std::string endpoint;
  int port = 2379;
  std::string prefix;
  int leaseTtlSeconds = 10;
  std::vector<std::string> leaseKeys;
  std::chrono::milliseconds timeout{0};
  static OptionSchema<Options> schema();
  void validate(const StoreContext& ctx) const;
};
std::shared_ptr<Store> create(const Options& options, const StoreContext& ctx);
// "host:port" (or "host", taking `defaultPort`) as an Endpoint; throws ConfigError.
Endpoint parseEndpoint(const std::string& text, int defaultPort);

}  // namespace commhost::etcdstore
