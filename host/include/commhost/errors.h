// SPDX-License-Identifier: Apache-2.0
// One error taxonomy for the host, plugins and applications.
//
// Every error thrown by commhost derives from commhost::Error and carries a code, so
// callers can catch the whole family or one kind. Messages are complete sentences that
// name the rank, the op and seq, the peer or key involved, and what to do next; build
// them with ErrorContext so they read the same everywhere.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>

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
  NotSupported,     // the backend does not implement the op (a partial backend; see backend.h)
};
COMMHOST_API const char* errorCodeName(ErrorCode code);

struct OpContext;
struct BackendContext;

// Where an error happened: the one formatter of message prefixes for the host and every
// plugin. format() gives e.g. "[group main rank 1] allreduce seq 12 (peer 3): ". Fields
// left unset (empty, -1, null, 0) are left out.
struct COMMHOST_API ErrorContext {
  std::string group;
  int rank = -1;
  const char* op = nullptr;  // a string with static storage (opName(), a literal)
  uint64_t seq = 0;
  int peer = -1;    // the other rank involved, when known
  std::string key;  // the store key involved, when there is one

  std::string format() const;

  // The context of one call: group, rank, op and seq as the host filled them.
  static ErrorContext of(const OpContext& op, int peer = -1);
  // A backend outside any call (its factory, rendezvous, teardown): its group and rank,
  // and what it was doing (`op`, e.g. "rendezvous") when given.
  static ErrorContext of(const BackendContext& backend, const char* op = nullptr, int peer = -1);
};

class COMMHOST_API Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& message) : std::runtime_error(message), code_(code) {}
  Error(ErrorCode code, const std::string& message, ErrorContext where)
      : std::runtime_error(message), code_(code), where_(std::make_shared<const ErrorContext>(std::move(where))) {}
  ErrorCode code() const { return code_; }
  // The context it was raised with (raise() sets it), so a consumer reads the peer, op
  // or seq as fields instead of parsing the message; every field unset when the error
  // was built from a message alone.
  const ErrorContext& where() const;

 private:
  ErrorCode code_;
  std::shared_ptr<const ErrorContext> where_;  // shared: copying an exception must not throw
};

#define COMMHOST_DEFINE_ERROR(Name, Code)                                                                       \
  class COMMHOST_API Name : public Error {                                                                      \
   public:                                                                                                      \
    explicit Name(const std::string& message) : Error(ErrorCode::Code, message) {}                              \
    Name(const std::string& message, ErrorContext where) : Error(ErrorCode::Code, message, std::move(where)) {} \
  };
COMMHOST_DEFINE_ERROR(ConfigError, Config)
COMMHOST_DEFINE_ERROR(PluginError, Plugin)
COMMHOST_DEFINE_ERROR(StoreError, Store)
COMMHOST_DEFINE_ERROR(TimeoutError, Timeout)
COMMHOST_DEFINE_ERROR(AbortedError, Aborted)
COMMHOST_DEFINE_ERROR(PeerLostError, PeerLost)
COMMHOST_DEFINE_ERROR(InvalidArgument, InvalidArgument)
COMMHOST_DEFINE_ERROR(BackendError, Backend)
COMMHOST_DEFINE_ERROR(NotSupportedError, NotSupported)
#undef COMMHOST_DEFINE_ERROR

// Throws the error class matching `code` with `message` as given (already prefixed),
// carrying `where`: for code that re-creates an error it caught (e.g. to hand each waiter
// its own copy) and must keep its context.
[[noreturn]] COMMHOST_API void rethrowAs(ErrorCode code, const std::string& message, const ErrorContext& where);
// Throws the error class matching `code` with "<context><what>. <hint>", carrying `where`.
[[noreturn]] COMMHOST_API void raise(ErrorCode code, const ErrorContext& where, const std::string& what,
                                     const std::string& hint = "");

}  // namespace commhost
