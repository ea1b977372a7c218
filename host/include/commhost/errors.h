// One error taxonomy for the host, plugins and applications.
//
// Every error thrown by commhost derives from commhost::Error and carries a code, so
// callers can catch the whole family or one kind. Messages are complete sentences that
// name the rank, the op and seq, the peer or key involved, and what to do next; build
// them with ErrorContext so they read the same everywhere.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>

#include "commhost/export.h"

namespace commhost {

enum class ErrorCode : uint8_t {
  Config,           // the configuration is invalid
  Plugin,           // a plugin could not be loaded or refused its options
  Store,            // the store failed or a key operation failed
  Timeout,          // an operation ran past its deadline
  Aborted,          // the work or its backend was aborted
  PeerLost,         // a peer died or went silent
  InvalidArgument,  // the caller passed something wrong
  Backend,          // the backend failed for another reason
};
COMMHOST_API const char* errorCodeName(ErrorCode code);

class COMMHOST_API Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& message) : std::runtime_error(message), code_(code) {}
  ErrorCode code() const { return code_; }

 private:
  ErrorCode code_;
};

#define COMMHOST_DEFINE_ERROR(Name, Code)                                      \
  class COMMHOST_API Name : public Error {                                     \
   public:                                                                     \
    explicit Name(const std::string& message) : Error(ErrorCode::Code, message) {} \
  };
COMMHOST_DEFINE_ERROR(ConfigError, Config)
COMMHOST_DEFINE_ERROR(PluginError, Plugin)
COMMHOST_DEFINE_ERROR(StoreError, Store)
COMMHOST_DEFINE_ERROR(TimeoutError, Timeout)
COMMHOST_DEFINE_ERROR(AbortedError, Aborted)
COMMHOST_DEFINE_ERROR(PeerLostError, PeerLost)
COMMHOST_DEFINE_ERROR(InvalidArgument, InvalidArgument)
COMMHOST_DEFINE_ERROR(BackendError, Backend)
#undef COMMHOST_DEFINE_ERROR

// Where an error happened. format() gives the message prefix, e.g.
// "[group main rank 1] allreduce seq 12 (peer 3): ".
struct COMMHOST_API ErrorContext {
  std::string group;
  int rank = -1;
  const char* op = nullptr;
  uint64_t seq = 0;
  int peer = -1;
  std::string key;

  std::string format() const;
};

// Throws the error class matching `code` with "<context><what> <hint>".
[[noreturn]] COMMHOST_API void raise(ErrorCode code, const ErrorContext& where,
                                     const std::string& what, const std::string& hint = "");

}  // namespace commhost
