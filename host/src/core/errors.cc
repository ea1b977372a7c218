#include "commhost/errors.h"

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

void raise(ErrorCode code, const ErrorContext& where, const std::string& what, const std::string& hint) {
  std::string message = where.format() + what;
  if (!hint.empty()) message += ". " + hint;
  switch (code) {
    case ErrorCode::Config: throw ConfigError(message);
    case ErrorCode::Plugin: throw PluginError(message);
    case ErrorCode::Store: throw StoreError(message);
    case ErrorCode::Timeout: throw TimeoutError(message);
    case ErrorCode::Aborted: throw AbortedError(message);
    case ErrorCode::PeerLost: throw PeerLostError(message);
    case ErrorCode::InvalidArgument: throw InvalidArgument(message);
    case ErrorCode::Backend: throw BackendError(message);
  }
  throw Error(code, message);
}

}  // namespace commhost
