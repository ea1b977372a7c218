// SPDX-License-Identifier: Apache-2.0
// What the plugin loader checks before it trusts a file or a pointer a plugin hands it.
// Scanning the plugin path opens every libcommhost_*.so there, including files a job
// never uses, so a hostile or broken file must end up "unavailable", never hang or crash
// the host: a FIFO blocked dlopen forever, a truncated .so raised SIGBUS when the loader
// touched a segment past its end, and a garbage descriptor or name pointer a SIGSEGV.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <string>

namespace commhost::plugin_checks {

// "" when `path` names a regular file; else why it is not loaded ("is a FIFO", "is a
// symbolic link that loops", "does not exist"). Never opens the file (a FIFO would block).
std::string fileProblem(const std::string& path, off_t* size);

// "" when the file holds a whole ELF shared object of this machine's class: every
// program and section header, and every segment's bytes, lie inside its `size` bytes.
std::string elfProblem(const std::string& path, off_t size);

// Whether `bytes` bytes at `p` can be read in this process (process_vm_readv, which
// fails with EFAULT instead of faulting).
bool readable(const void* p, size_t bytes);

// The NUL-terminated string at `p`, if it is readable and ends within `max` bytes.
bool readableString(const char* p, size_t max, std::string* out);

}  // namespace commhost::plugin_checks
