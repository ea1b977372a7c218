// SPDX-License-Identifier: Apache-2.0
// Store: the key-value service ranks rendezvous through.
//
// Keys and values are binary-safe byte strings. Every method may be called from any
// thread at once. get() and wait() block until the keys exist or the store's timeout
// (or the given one) passes, then throw TimeoutError naming the missing keys. A store
// that loses its server throws StoreError naming where it was connected. setTimeout()
// is the exception: call it before the store is shared between threads.
//
// Store is an interface without data members: the host calls a store only through its
// virtual functions, so a plugin's store never depends on libcommhost's layout. Most
// stores derive from StoreBase, which keeps the timeout in the store's own object.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "commhost/export.h"
#include "commhost/mutex.h"

namespace commhost {

using Bytes = std::vector<uint8_t>;
COMMHOST_API Bytes toBytes(const std::string& text);
COMMHOST_API std::string toString(const Bytes& bytes);
// The integer a counter key holds (decimal text, as add() writes it); throws
// InvalidArgument naming the key when the value is something else. For Store::add.
COMMHOST_API int64_t counterValue(const std::string& key, const Bytes& value);

class COMMHOST_API Store {
 public:
  virtual ~Store() = default;

  virtual void set(const std::string& key, const Bytes& value) = 0;
  virtual Bytes get(const std::string& key) = 0;
  // Adds `delta` to the integer stored as decimal text at `key` (0 if absent); returns the sum.
  virtual int64_t add(const std::string& key, int64_t delta) = 0;
  // Sets `desired` if the current value equals `expected` (or the key is absent and
  // `expected` is empty); returns the value now stored.
  virtual Bytes compareSet(const std::string& key, const Bytes& expected, const Bytes& desired) = 0;
  virtual void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) = 0;
  void wait(const std::vector<std::string>& keys) { wait(keys, timeout()); }
  virtual bool check(const std::vector<std::string>& keys) = 0;
  virtual bool deleteKey(const std::string& key) = 0;
  virtual int64_t numKeys() = 0;
  virtual std::vector<Bytes> multiGet(const std::vector<std::string>& keys);
  virtual void multiSet(const std::vector<std::string>& keys, const std::vector<Bytes>& values);
  // Appends to the value at `key`, creating it when absent.
  virtual void append(const std::string& key, const Bytes& value) = 0;

  // How long get() and wait(keys) wait; setTimeout() before the store is shared.
  virtual std::chrono::milliseconds timeout() const = 0;
  virtual void setTimeout(std::chrono::milliseconds timeout) = 0;
};
using StorePtr = std::shared_ptr<Store>;

// What most stores derive from: Store, with the timeout kept here. Inline, so its member
// is part of the deriving class's own layout, compiled into whichever side builds it.
class StoreBase : public Store {
 public:
  explicit StoreBase(std::chrono::milliseconds timeout = std::chrono::seconds(300)) : timeout_(timeout) {}
  std::chrono::milliseconds timeout() const override { return timeout_; }
  void setTimeout(std::chrono::milliseconds timeout) override { timeout_ = timeout; }

 protected:
  std::chrono::milliseconds timeout_;
};

// In-memory store for one process: unit tests and single-process jobs (threads as ranks).
class COMMHOST_API HashStore final : public StoreBase {
 public:
  using Store::wait;
  using StoreBase::StoreBase;
  void set(const std::string& key, const Bytes& value) override;
  Bytes get(const std::string& key) override;
  int64_t add(const std::string& key, int64_t delta) override;
  Bytes compareSet(const std::string& key, const Bytes& expected, const Bytes& desired) override;
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  bool check(const std::vector<std::string>& keys) override;
  bool deleteKey(const std::string& key) override;
  int64_t numKeys() override;
  void append(const std::string& key, const Bytes& value) override;

 private:
  void waitLocked(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) REQUIRES(mutex_);
  Mutex mutex_;
  CondVar cv_;  // signalled on every write
  std::map<std::string, Bytes> map_ GUARDED_BY(mutex_);
};

// A store that forwards every call to another one, as LevelDB's EnvWrapper does an Env: a
// decorator derives from it and overrides only what it changes (counting calls, waiting in
// slices). Its timeout starts as the base store's. Not for stores that rewrite keys
// (PrefixStore), which change every call anyway.
class COMMHOST_API StoreWrapper : public StoreBase {
 public:
  explicit StoreWrapper(StorePtr base);  // InvalidArgument when null
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

  const StorePtr& base() const { return base_; }

 private:
  StorePtr base_;
};

// Prepends "<prefix>/" to every key of an underlying store. numKeys() counts the
// underlying store's keys, as c10d's PrefixStore does. get() and wait() without a
// timeout use the underlying store's timeout.
class COMMHOST_API PrefixStore final : public StoreBase {
 public:
  PrefixStore(std::string prefix, StorePtr base);
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

  const std::string& prefix() const { return prefix_; }
  const StorePtr& base() const { return base_; }

 private:
  std::string full(const std::string& key) const { return prefix_ + "/" + key; }
  std::vector<std::string> full(const std::vector<std::string>& keys) const;
  std::string prefix_;
  StorePtr base_;
};

}  // namespace commhost
