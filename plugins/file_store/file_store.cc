// SPDX-License-Identifier: Apache-2.0
#include "file_store.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <system_error>
#include <thread>

#include "commhost/errors.h"

namespace commhost::filestore {
namespace {

constexpr uint8_t kSet = 1;
constexpr uint8_t kDelete = 2;
// Counts live store objects on the file; the last one to go removes the file.
const std::string kRefCountKey =
    "\x01"
    "commhost/file_store/refcount";

void putU32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>(v >> (8 * i)));
}

uint32_t getU32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 | static_cast<uint32_t>(p[2]) << 16 |
         static_cast<uint32_t>(p[3]) << 24;
}

}  // namespace

class FileStore::Lock {
 public:
  Lock(const FileStore& store, short type) : store_(store) {
    struct flock fl {};
    fl.l_type = type;
    fl.l_whence = SEEK_SET;
    while (::fcntl(store_.fd_, F_OFD_SETLKW, &fl) != 0)
      if (errno != EINTR) store_.fail(std::string("cannot lock it: ") + std::generic_category().message(errno));
  }
  ~Lock() {
    struct flock fl {};
    fl.l_type = F_UNLCK;
    fl.l_whence = SEEK_SET;
    ::fcntl(store_.fd_, F_OFD_SETLK, &fl);
  }

 private:
  const FileStore& store_;
};

FileStore::FileStore(std::string path, std::chrono::milliseconds timeout) : StoreBase(timeout), path_(std::move(path)) {
  fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0)
    fail(std::string("cannot open it: ") + std::generic_category().message(errno) +
         "; check the directory exists and is writable");
  MutexLock guard(&mutex_);
  Lock lock(*this, F_WRLCK);
  refresh();
  addLocked(kRefCountKey, 1);
}

FileStore::~FileStore() {
  try {
    MutexLock guard(&mutex_);
    Lock lock(*this, F_WRLCK);
    refresh();
    if (addLocked(kRefCountKey, -1) == 0) ::unlink(path_.c_str());
  } catch (const std::exception&) {
    // Destructors must not throw; the file is then left behind for the operator.
  }
  ::close(fd_);
}

void FileStore::fail(const std::string& what) const { throw StoreError("file store " + path_ + ": " + what); }

void FileStore::refresh() {
  const off_t end = ::lseek(fd_, 0, SEEK_END);
  if (end < 0) fail(std::string("cannot read it: ") + std::generic_category().message(errno));
  if (end == pos_) return;
  std::vector<uint8_t> buf(static_cast<size_t>(end - pos_));
  size_t done = 0;
  while (done < buf.size()) {
    const ssize_t got = ::pread(fd_, buf.data() + done, buf.size() - done, pos_ + static_cast<off_t>(done));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0)
      fail(std::string("cannot read it: ") + (got < 0 ? std::generic_category().message(errno) : "unexpected end"));
    done += static_cast<size_t>(got);
  }
  size_t at = 0;
  while (at < buf.size()) {
    if (buf.size() - at < 5) fail("it is corrupt (truncated record); remove it and restart the job");
    const uint8_t type = buf[at];
    const uint32_t klen = getU32(&buf[at + 1]);
    if (buf.size() - at - 5 < klen + 4ull) fail("it is corrupt (truncated key); remove it and restart the job");
    std::string key(reinterpret_cast<const char*>(&buf[at + 5]), klen);
    const uint32_t vlen = getU32(&buf[at + 5 + klen]);
    const size_t valueAt = at + 9 + klen;
    if (buf.size() - valueAt < vlen) fail("it is corrupt (truncated value); remove it and restart the job");
    if (type == kSet) cache_[key] = Bytes(buf.begin() + valueAt, buf.begin() + valueAt + vlen);
    else if (type == kDelete) cache_.erase(key);
    else fail("it is corrupt (unknown record type); remove it and restart the job");
    at = valueAt + vlen;
  }
  pos_ = end;
}

void FileStore::write(uint8_t type, const std::string& key, const Bytes& value) {
  std::string record(1, static_cast<char>(type));
  putU32(record, static_cast<uint32_t>(key.size()));
  record += key;
  putU32(record, static_cast<uint32_t>(value.size()));
  record.append(value.begin(), value.end());
  const off_t end = ::lseek(fd_, 0, SEEK_END);
  size_t done = 0;
  while (done < record.size()) {
    const ssize_t put = ::pwrite(fd_, record.data() + done, record.size() - done, end + static_cast<off_t>(done));
    if (put < 0 && errno == EINTR) continue;
    if (put <= 0) fail(std::string("cannot write it: ") + std::generic_category().message(errno));
    done += static_cast<size_t>(put);
  }
  refresh();
}

void FileStore::set(const std::string& key, const Bytes& value) {
  MutexLock guard(&mutex_);
  Lock lock(*this, F_WRLCK);
  refresh();
  write(kSet, key, value);
}

Bytes FileStore::get(const std::string& key) {
  wait({key}, timeout_);
  MutexLock guard(&mutex_);
  return cache_.at(key);
}

int64_t FileStore::addLocked(const std::string& key, int64_t delta) {
  int64_t sum = delta;
  auto it = cache_.find(key);
  if (it != cache_.end()) sum += counterValue(key, it->second);
  write(kSet, key, toBytes(std::to_string(sum)));
  return sum;
}

int64_t FileStore::add(const std::string& key, int64_t delta) {
  MutexLock guard(&mutex_);
  Lock lock(*this, F_WRLCK);
  refresh();
  return addLocked(key, delta);
}

Bytes FileStore::compareSet(const std::string& key, const Bytes& expected, const Bytes& desired) {
  MutexLock guard(&mutex_);
  Lock lock(*this, F_WRLCK);
  refresh();
  auto it = cache_.find(key);
  if (it == cache_.end()) {
    if (!expected.empty()) return expected;
    write(kSet, key, desired);
    return desired;
  }
  if (it->second == expected) write(kSet, key, desired);
  return cache_.at(key);
}

void FileStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  auto pause = std::chrono::milliseconds(1);
  while (true) {
    std::string missing;
    {
      MutexLock guard(&mutex_);
      Lock lock(*this, F_RDLCK);
      refresh();
      for (const auto& k : keys)
        if (!cache_.count(k)) missing += (missing.empty() ? "'" : ", '") + k + "'";
    }
    if (missing.empty()) return;
    if (std::chrono::steady_clock::now() >= deadline)
      throw TimeoutError("file store " + path_ + ": wait timed out after " + formatDuration(timeout) +
                         "; keys not set: " + missing +
                         ". The rank that sets them may have failed or not "
                         "reached this point");
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(50));
  }
}

bool FileStore::check(const std::vector<std::string>& keys) {
  MutexLock guard(&mutex_);
  Lock lock(*this, F_RDLCK);
  refresh();
  for (const auto& k : keys)  // a loop: the analysis does not see the lock inside a lambda
    if (!cache_.count(k)) return false;
  return true;
}

bool FileStore::deleteKey(const std::string& key) {
  MutexLock guard(&mutex_);
  Lock lock(*this, F_WRLCK);
  refresh();
  if (!cache_.count(key)) return false;
  write(kDelete, key, {});
  return true;
}

int64_t FileStore::numKeys() {
  MutexLock guard(&mutex_);
  Lock lock(*this, F_RDLCK);
  refresh();
  return static_cast<int64_t>(cache_.size()) - static_cast<int64_t>(cache_.count(kRefCountKey));
}

void FileStore::append(const std::string& key, const Bytes& value) {
  MutexLock guard(&mutex_);
  Lock lock(*this, F_WRLCK);
  refresh();
  Bytes joined = cache_.count(key) ? cache_[key] : Bytes{};
  joined.insert(joined.end(), value.begin(), value.end());
  write(kSet, key, joined);
}

OptionSchema<Options> Options::schema() {
  return OptionSchema<Options>()
      .option("path", &Options::path, "", "The store file, on a filesystem every rank sees (e.g. NFS)")
      .option("timeout", &Options::timeout, "5m", "Wait timeout of store calls", {0.001, 86400});
}

void Options::validate(const StoreContext& ctx) const {
  if (path.empty())
    refuseOption("path", "[rank " + std::to_string(ctx.rank) + "] file store: no store file given",
                 "set store.options.path to a file on a filesystem every rank sees");
}

std::shared_ptr<Store> create(const Options& options, const StoreContext&) {
  return std::make_shared<FileStore>(options.path, options.timeout);
}

}  // namespace commhost::filestore
