// SPDX-License-Identifier: Apache-2.0
#include "commhost/errors.h"

#include "commhost/sdk/plugin.h"

namespace commhost {

const char* errorCodeName(ErrorCode code) {
  switch (code) {
    case ErrorCode::Config: return "config";
    case ErrorCode::Plugin: return "plugin";
    case ErrorCode::Store: return "store";
    case ErrorCode::Timeout: return "timeout";
    case ErrorCode::Aborted: return "aborted";
    case ErrorCode::PeerLost: return "peer-lost";
    case ErrorCode::InvalidArgument: return "invalid-argument";
    case ErrorCode::Backend: return "backend";
    case ErrorCode::NotSupported: return "not-supported";
  }
  return "unknown";
}

std::string ErrorContext::format() const {
  std::string out;
  if (!group.empty() || rank >= 0) {
    out += "[";
    if (!group.empty()) out += "group " + group;
    if (rank >= 0) out += (group.empty() ? "" : " ") + std::string("rank ") + std::to_string(rank);
    out += "] ";
  }
  if (op) {
    out += op;
    if (seq) out += " seq " + std::to_string(seq);
  }
  if (peer >= 0) out += std::string(op ? " " : "") + "(peer " + std::to_string(peer) + ")";
  if (!key.empty()) out += std::string(op || peer >= 0 ? " " : "") + "(key '" + key + "')";
  if (op || peer >= 0 || !key.empty()) out += ": ";
  return out;
}

ErrorContext ErrorContext::of(const OpContext& op, int peer) {
  ErrorContext where;
  where.group = op.group;
  where.rank = op.rank;
  where.op = opName(op.op);
  where.seq = op.seq;
  where.peer = peer;
  return where;
}

ErrorContext ErrorContext::of(const BackendContext& backend, const char* op, int peer) {
  ErrorContext where;
  where.group = backend.groupName;
  where.rank = backend.rank;
  where.op = op;
  where.peer = peer;
  return where;
}

const ErrorContext& Error::where() const {
  static const ErrorContext kNowhere;
  return where_ ? *where_ : kNowhere;
}

void raise(ErrorCode code, const ErrorContext& where, const std::string& what, const std::string& hint) {
  std::string message = where.format() + what;
  if (!hint.empty()) message += ". " + hint;
  rethrowAs(code, message, where);
}

void rethrowAs(ErrorCode code, const std::string& message, const ErrorContext& where) {
  switch (code) {
    case ErrorCode::Config: throw ConfigError(message, where);
    case ErrorCode::Plugin: throw PluginError(message, where);
    case ErrorCode::Store: throw StoreError(message, where);
    case ErrorCode::Timeout: throw TimeoutError(message, where);
    case ErrorCode::Aborted: throw AbortedError(message, where);
    case ErrorCode::PeerLost: throw PeerLostError(message, where);
    case ErrorCode::InvalidArgument: throw InvalidArgument(message, where);
    case ErrorCode::Backend: throw BackendError(message, where);
    case ErrorCode::NotSupported: throw NotSupportedError(message, where);
  }
  throw Error(code, message, where);
}

}  // namespace commhost
