// SPDX-License-Identifier: Apache-2.0
// The file store: the Store API over one append-only file on a shared filesystem (NFS
// included), for clusters that rendezvous without a TCP server.
//
// Every change is a record appended under an fcntl write lock; each call first reads
// the records other processes appended since its last look. The file is removed when
// the last store object using it (counted in the file) is destroyed. Use a fresh path
// per job: a file left by a crashed job (its count never reaches zero) still holds that
// job's keys, and a process that opens the path just as the last user removes it gets
// a new, separate file.
// Threading: a mutex serialises calls on one object; open-file-description fcntl locks
// (F_OFD_SETLKW) serialise store objects, in this process and in others, NFS included.
#pragma once

#include <map>
#include <mutex>
#include <string>

#include "commhost/mutex.h"
#include "commhost/sdk/plugin.h"
#include "commhost/sdk/typed_options.h"

namespace commhost::filestore {

class FileStore final : public StoreBase {
 public:
  FileStore(std::string path, std::chrono::milliseconds timeout);
  ~FileStore() override;

  using Store::wait;
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
  class Lock;                       // holds the fcntl lock on the whole file for one call
  void refresh() REQUIRES(mutex_);  // reads records appended since pos_; caller holds a Lock
  void write(uint8_t type, const std::string& key, const Bytes& value) REQUIRES(mutex_);  // and a write Lock
  int64_t addLocked(const std::string& key, int64_t delta) REQUIRES(mutex_);
  [[noreturn]] void fail(const std::string& what) const;

  std::string path_;
  int fd_ = -1;  // opened by the constructor, then only read
  // Between this process's threads; the fcntl Lock is between processes.
  Mutex mutex_;
  off_t pos_ GUARDED_BY(mutex_) = 0;  // bytes of the file already applied to cache_
  std::map<std::string, Bytes> cache_ GUARDED_BY(mutex_);
};

// The plugin options (schema in file_store.cc).
struct Options {
  std::string path;
  std::chrono::milliseconds timeout{0};
  static OptionSchema<Options> schema();
  void validate(const StoreContext& ctx) const;  // a path is required
};
std::shared_ptr<Store> create(const Options& options, const StoreContext& ctx);

}  // namespace commhost::filestore
