// SPDX-License-Identifier: Apache-2.0
#include "file_checks.h"

#include <elf.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <vector>

namespace commhost::plugin_checks {
namespace {

#if UINTPTR_MAX == 0xffffffffffffffffULL
using Ehdr = Elf64_Ehdr;
using Phdr = Elf64_Phdr;
constexpr unsigned char kClass = ELFCLASS64;
#else
using Ehdr = Elf32_Ehdr;
using Phdr = Elf32_Phdr;
constexpr unsigned char kClass = ELFCLASS32;
#endif

const char* kindOf(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  return "not a regular file";
}

bool readAt(int fd, void* into, size_t bytes, off_t at) {
  size_t done = 0;
  while (done < bytes) {
    const ssize_t got = ::pread(fd, static_cast<char*>(into) + done, bytes - done, at + static_cast<off_t>(done));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    done += static_cast<size_t>(got);
  }
  return true;
}

// Whether [offset, offset + length) lies inside a file of `size` bytes (no overflow).
bool inside(uint64_t offset, uint64_t length, off_t size) {
  const auto total = static_cast<uint64_t>(size);
  return offset <= total && length <= total - offset;
}

}  // namespace

std::string fileProblem(const std::string& path, off_t* size) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    const int error = errno;
    if (error == ENOENT) return "does not exist (no such file); check the path";
    if (error == ELOOP) return "is a symbolic link that loops (too many levels of links); fix or remove the link";
    return std::string("cannot be examined: ") + std::strerror(error);
  }
  if (!S_ISREG(st.st_mode))
    return std::string("is ") + kindOf(st.st_mode) + ", not a regular file; only regular files are loaded as plugins";
  *size = st.st_size;
  return "";
}

std::string elfProblem(const std::string& path, off_t size) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return std::string("cannot be read: ") + std::strerror(errno);
  std::string problem;
  Ehdr eh{};
  if (!readAt(fd, &eh, sizeof eh, 0) || std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0) {
    problem = "is not an ELF shared object (no ELF header)";
  } else if (eh.e_ident[EI_CLASS] != kClass || eh.e_type != ET_DYN) {
    problem = "is an ELF file but not a shared object for this machine (class or type)";
  } else if (eh.e_phentsize != sizeof(Phdr) ||
             !inside(eh.e_phoff, static_cast<uint64_t>(eh.e_phnum) * sizeof(Phdr), size) ||
             (eh.e_shoff != 0 && !inside(eh.e_shoff, static_cast<uint64_t>(eh.e_shnum) * eh.e_shentsize, size))) {
    problem = "is truncated or damaged (its ELF headers point past the end of its " + std::to_string(size) + " bytes)";
  } else {
    std::vector<Phdr> ph(eh.e_phnum);
    if (!readAt(fd, ph.data(), ph.size() * sizeof(Phdr), static_cast<off_t>(eh.e_phoff))) {
      problem = "cannot be read (its program headers)";
    } else {
      for (const Phdr& p : ph)
        if (p.p_type == PT_LOAD && !inside(p.p_offset, p.p_filesz, size)) {
          problem = "is truncated (a loadable segment ends at byte " + std::to_string(p.p_offset + p.p_filesz) +
                    " of a " + std::to_string(size) + "-byte file); rebuild or reinstall it";
          break;
        }
    }
  }
  ::close(fd);
  return problem;
}

namespace {
// Copies `n` bytes at `remote` (within one page) into `local`; false when they cannot be
// read. process_vm_readv fails with EFAULT instead of faulting; where it is refused
// outright (a seccomp filter, a kernel without cross-memory attach), a write() of the
// bytes into a pipe does the same (EFAULT on unreadable memory).
bool readChunk(void* local, const void* remote, size_t n) {
  iovec to{local, n};
  iovec from{const_cast<void*>(remote), n};
  const ssize_t got = ::process_vm_readv(::getpid(), &to, 1, &from, 1, 0);
  if (got == static_cast<ssize_t>(n)) return true;
  if (got >= 0 || errno == EFAULT) return false;
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return true;     // no way to check: as before these checks
  const ssize_t wrote = ::write(fds[1], remote, n);  // n <= a page, under a pipe's capacity
  const bool ok = wrote == static_cast<ssize_t>(n) && ::read(fds[0], local, n) == static_cast<ssize_t>(n);
  ::close(fds[0]);
  ::close(fds[1]);
  return ok;
}

size_t toPageEnd(uintptr_t at) {
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  return page - at % page;
}
}  // namespace

bool readable(const void* p, size_t bytes) {
  if (!p) return false;
  std::vector<char> copy;
  for (size_t done = 0; done < bytes;) {
    const auto at = reinterpret_cast<uintptr_t>(p) + done;
    const size_t chunk = std::min(toPageEnd(at), bytes - done);
    copy.resize(chunk);
    if (!readChunk(copy.data(), reinterpret_cast<const void*>(at), chunk)) return false;
    done += chunk;
  }
  return true;
}

bool readableString(const char* p, size_t max, std::string* out) {
  if (!p) return false;
  out->clear();
  // Page by page: a short string near the end of its mapping must not fail for the bytes
  // after it.
  std::vector<char> bytes;
  while (out->size() < max) {
    const auto at = reinterpret_cast<uintptr_t>(p) + out->size();
    const size_t chunk = std::min(toPageEnd(at), max - out->size());
    bytes.resize(chunk);
    if (!readChunk(bytes.data(), reinterpret_cast<const void*>(at), chunk)) return false;
    for (char c : bytes) {
      if (c == '\0') return true;
      out->push_back(c);
    }
  }
  return false;
}

}  // namespace commhost::plugin_checks
