// The gloo backend's lifecycle: options, rendezvous, error description, abort, shutdown.
#include <gloo/common/error.h>

#include <csignal>

#include "commhost/errors.h"
#include "gloo_backend.h"
#include "rendezvous.h"

namespace commhost::gloo_backend {

const Capabilities& capabilities() {
  static const Capabilities caps = [] {
    Capabilities c{Capabilities::allOps(), Capabilities::allDTypes(), Capabilities::allReduceOps(), {DeviceType::CPU},
                   {Feature::Split, Feature::AnySource, Feature::Coalescing, Feature::MultiProcess, Feature::MultiHost}};
    c.ops.remove(OpType::MonitoredBarrier);  // the host serves it over the store
    return c;
  }();
  return caps;
}

const std::vector<OptionSpec>& optionSpecs() {
  static const std::vector<OptionSpec> specs = {
      {"threads", OptionType::Int, "1",
       "Worker threads running queued ops; 0 runs each op on the calling thread (lowest latency, no overlap)", {}, 0, 64},
      {"contexts", OptionType::Int, "2", "Gloo contexts used in rotation (by seq), so independent ops overlap", {}, 1, 16},
      {"device", OptionType::String, "", "Interface name, hostname or address to use; empty: loopback 127.0.0.1"},
      {"allreduce_algorithm", OptionType::Enum, "auto", "auto: bcube below ring_threshold, ring from there",
       {"auto", "ring", "bcube"}},
      {"ring_threshold", OptionType::Size, "256KiB", "Message size from which auto allreduce uses ring"},
      {"timeout", OptionType::Duration, "0s", "Rendezvous and default op timeout; 0s: the group's timeout", {}, 0, 86400 * 7},
  };
  return specs;
}

std::unique_ptr<Backend> create(const OptionValues& options, const BackendContext& ctx) {
  // Gloo writes to its sockets without MSG_NOSIGNAL: a peer that dies would kill this
  // process with SIGPIPE instead of failing the op with "connection closed by peer".
  // Ignore the signal unless the application installed its own handler.
  struct sigaction current {};
  if (::sigaction(SIGPIPE, nullptr, &current) == 0 && current.sa_handler == SIG_DFL) ::signal(SIGPIPE, SIG_IGN);
  return std::make_unique<GlooBackend>(options, ctx);
}

GlooBackend::GlooBackend(const OptionValues& options, const BackendContext& ctx)
    : ctx_(ctx), ringThreshold_(options.getInt("ring_threshold")) {
  const std::string algorithm = options.getString("allreduce_algorithm");
  algorithm_ = algorithm == "ring" ? AllreduceAlgorithm::Ring
               : algorithm == "bcube" ? AllreduceAlgorithm::Bcube
                                      : AllreduceAlgorithm::Auto;
  auto timeout = options.getDuration("timeout");
  if (timeout.count() == 0) timeout = ctx.timeout;
  auto device = createDevice(options.getString("device"), ctx);
  contexts_ = connectContexts(ctx_, device, static_cast<int>(options.getInt("contexts")) + 1, timeout);
  p2p_ = contexts_.back();
  contexts_.pop_back();
  auto describe = [this](const OpContext& op, std::exception_ptr e) { return this->describe(op, e); };
  queue_ = std::make_unique<WorkQueue>(static_cast<int>(options.getInt("threads")), describe);
  p2pQueue_ = std::make_unique<WorkQueue>(1, describe);
}

GlooBackend::~GlooBackend() {
  queue_.reset();
  p2pQueue_.reset();
}

Call GlooBackend::callFor(const OpContext& op) const {
  return {contexts_[op.seq % contexts_.size()], static_cast<uint32_t>(op.seq), op.timeout};
}

// Gloo reports a peer that went away and a deadline that passed as IoException /
// EnforceNotMet with text only; classify them so callers can catch by kind.
std::exception_ptr GlooBackend::describe(const OpContext& op, std::exception_ptr error) const {
  const std::string where = "[group " + ctx_.groupName + " rank " + std::to_string(ctx_.rank) + "] " + opName(op.op) +
                            " seq " + std::to_string(op.seq) + " (gloo): ";
  try {
    std::rethrow_exception(error);
  } catch (const Error&) {
    return error;
  } catch (const ::gloo::IoException& e) {
    const std::string what = e.what();
    if (what.find("Timed out") != std::string::npos || what.find("timed out") != std::string::npos)
      return std::make_exception_ptr(TimeoutError(where + what + ". A peer may not have joined this collective; "
                                                          "check every rank issues the same ops in the same order"));
    return std::make_exception_ptr(PeerLostError(where + what + ". A peer process may have died; check its log"));
  } catch (const std::exception& e) {
    return std::make_exception_ptr(BackendError(where + e.what()));
  }
}

void GlooBackend::abort(const std::string& reason) {
  queue_->abort(reason);
  p2pQueue_->abort(reason);
}

void GlooBackend::shutdown() {
  queue_->drain();
  p2pQueue_->drain();
}

}  // namespace commhost::gloo_backend
