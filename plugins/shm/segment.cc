// SPDX-License-Identifier: Apache-2.0
#include "segment.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <functional>
#include <new>
#include <system_error>

#include "commhost/errors.h"

namespace commhost::shm {
namespace {

constexpr uint64_t kMagic = 0x434f4d4853484d31ull;  // "COMHSHM1"
constexpr uint32_t kVersion = 4;                    // 4: the op signature in each line
constexpr size_t kPage = 4096;
constexpr const char* kPrefix = "commhost-shm-";

struct Header {
  std::atomic<uint64_t> magic;  // stored last (release): the rest is initialised
  uint32_t version;
  uint32_t world;
  uint64_t chunk;
  uint32_t depth;
  int64_t ownerPid;
};

size_t roundUp(size_t n, size_t to) { return (n + to - 1) / to * to; }

std::string errnoText(int err) { return std::generic_category().message(err); }

// The creator pid in "commhost-shm-<jobhash>-<pid>-<groupid>", or -1.
long pidOfName(const std::string& name) {
  if (name.rfind(kPrefix, 0) != 0) return -1;
  const size_t last = name.rfind('-');
  if (last == std::string::npos || last == 0) return -1;
  const size_t before = name.rfind('-', last - 1);
  if (before == std::string::npos || before + 1 >= last) return -1;
  const std::string text = name.substr(before + 1, last - before - 1);
  char* end = nullptr;
  const long pid = std::strtol(text.c_str(), &end, 10);
  return end && *end == '\0' && pid > 0 ? pid : -1;
}

}  // namespace

size_t SegmentLayout::controlOffset() const { return roundUp(sizeof(Header), kPage); }
size_t SegmentLayout::lineOffset() const {
  return roundUp(controlOffset() + sizeof(RankControl) * static_cast<size_t>(world), kPage);
}
size_t SegmentLayout::dataOffset() const {
  return roundUp(lineOffset() + sizeof(Line) * static_cast<size_t>(world) * static_cast<size_t>(depth), kPage);
}
size_t SegmentLayout::totalBytes() const { return dataOffset() + slotBytes() * static_cast<size_t>(world); }

std::string segmentName(const std::string& groupName, const std::string& backendName) {
  static std::atomic<int> groups{0};
  const size_t job = std::hash<std::string>{}(groupName + "/" + backendName) & 0xffffffffu;
  char name[96];
  std::snprintf(name, sizeof(name), "/%s%08zx-%ld-%d", kPrefix, job, static_cast<long>(::getpid()), groups++);
  return name;
}

int removeStaleSegments() {
  DIR* dir = ::opendir("/dev/shm");
  if (!dir) return 0;
  int removed = 0;
  while (const dirent* entry = ::readdir(dir)) {
    const std::string name = entry->d_name;
    const long pid = pidOfName(name);
    if (pid <= 0) continue;
    if (::kill(static_cast<pid_t>(pid), 0) == -1 && errno == ESRCH && ::shm_unlink(("/" + name).c_str()) == 0)
      ++removed;
  }
  ::closedir(dir);
  return removed;
}

Segment::Segment(std::string name, SegmentLayout layout, void* base, bool owner)
    : name_(std::move(name)),
      layout_(layout),
      base_(static_cast<uint8_t*>(base)),
      data_(base_ + layout.dataOffset()),
      lines_(reinterpret_cast<Line*>(base_ + layout.lineOffset())),
      owner_(owner),
      linked_(owner) {}

Segment::~Segment() {
  unlink();
  ::munmap(base_, layout_.totalBytes());
}

std::unique_ptr<Segment> Segment::create(const std::string& name, const SegmentLayout& layout) {
  removeStaleSegments();
  const int fd = ::shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
  if (fd < 0) throw BackendError("shm: cannot create shared memory " + name + ": " + errnoText(errno));
  const size_t bytes = layout.totalBytes();
  // posix_fallocate reserves the pages: a /dev/shm too small (64 MiB in a default Docker
  // container) fails here with ENOSPC instead of killing a rank with SIGBUS mid-op.
  int allocError = 0;
  if (::ftruncate(fd, static_cast<off_t>(bytes)) != 0) allocError = errno;
  else allocError = ::posix_fallocate(fd, 0, static_cast<off_t>(bytes));
  if (allocError != 0) {
    const int err = allocError;
    ::close(fd);
    ::shm_unlink(name.c_str());
    throw BackendError("shm: cannot size shared memory " + name + " to " + std::to_string(bytes) +
                       " bytes: " + errnoText(err) + ". Check free space in /dev/shm or lower the chunk option");
  }
  void* base = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  const int err = errno;
  ::close(fd);
  if (base == MAP_FAILED) {
    ::shm_unlink(name.c_str());
    throw BackendError("shm: cannot map shared memory " + name + ": " + errnoText(err));
  }
  // ftruncate zero-fills: every counter starts at 0. Construct the atomics in place.
  auto* header = new (base) Header{};
  auto* controls = reinterpret_cast<uint8_t*>(base) + layout.controlOffset();
  for (int r = 0; r < layout.world; ++r) new (controls + sizeof(RankControl) * r) RankControl{};
  auto* lines = reinterpret_cast<uint8_t*>(base) + layout.lineOffset();
  for (int i = 0; i < layout.world * layout.depth; ++i) new (lines + sizeof(Line) * i) Line{};
  header->version = kVersion;
  header->world = static_cast<uint32_t>(layout.world);
  header->chunk = layout.chunk;
  header->depth = static_cast<uint32_t>(layout.depth);
  header->ownerPid = ::getpid();
  header->magic.store(kMagic, std::memory_order_release);
  return std::unique_ptr<Segment>(new Segment(name, layout, base, true));
}

std::unique_ptr<Segment> Segment::open(const std::string& name, const SegmentLayout& layout) {
  const int fd = ::shm_open(name.c_str(), O_RDWR, 0600);
  if (fd < 0)
    throw BackendError("shm: cannot open shared memory " + name + " created by rank 0: " + errnoText(errno) +
                       ". Every rank of an shm group must run on the same host (and in the same IPC namespace)");
  struct stat st {};
  const size_t bytes = layout.totalBytes();
  if (::fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) != bytes) {
    ::close(fd);
    throw BackendError("shm: shared memory " + name + " has " + std::to_string(st.st_size) + " bytes, expected " +
                       std::to_string(bytes) + "; do all ranks use the same shm options?");
  }
  void* base = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  const int err = errno;
  ::close(fd);
  if (base == MAP_FAILED) throw BackendError("shm: cannot map shared memory " + name + ": " + errnoText(err));
  auto* header = static_cast<Header*>(base);
  if (header->magic.load(std::memory_order_acquire) != kMagic || header->version != kVersion ||
      header->world != static_cast<uint32_t>(layout.world) || header->chunk != layout.chunk ||
      header->depth != static_cast<uint32_t>(layout.depth)) {
    ::munmap(base, bytes);
    throw BackendError("shm: shared memory " + name +
                       " has another layout (version, world size, chunk or depth) "
                       "than this rank expects; do all ranks use the same shm options and commhost build?");
  }
  return std::unique_ptr<Segment>(new Segment(name, layout, base, false));
}

void Segment::unlink() {
  if (!linked_) return;
  linked_ = false;
  ::shm_unlink(name_.c_str());
}

RankControl& Segment::control(int rank) const {
  return *reinterpret_cast<RankControl*>(base_ + layout_.controlOffset() + sizeof(RankControl) * rank);
}

}  // namespace commhost::shm
