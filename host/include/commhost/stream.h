// SPDX-License-Identifier: Apache-2.0
// The caller's CUDA stream, as c10d's "current stream": what ops on CUDA tensors issued
// from this thread are ordered after. commhost never includes the CUDA headers here; a
// stream is an opaque cudaStream_t. The ProcessGroup copies the calling thread's current
// stream into OpContext::stream of every op it issues.
#pragma once

#include "commhost/export.h"

namespace commhost {

// This thread's current stream; null (the default) means the legacy default stream.
COMMHOST_API void* currentStream();
COMMHOST_API void setCurrentStream(void* stream);

// Sets the current stream for a scope, then restores the previous one.
class StreamGuard {
 public:
  explicit StreamGuard(void* stream) : previous_(currentStream()) { setCurrentStream(stream); }
  ~StreamGuard() { setCurrentStream(previous_); }
  StreamGuard(const StreamGuard&) = delete;
  StreamGuard& operator=(const StreamGuard&) = delete;

 private:
  void* previous_;
};

}  // namespace commhost
