// SPDX-License-Identifier: Apache-2.0
#include "inject.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <thread>

#include "commhost/errors.h"
#include "commhost/logging.h"

namespace commhost::cli {

Injection parseInjection(const std::string& spec) {
  const auto bad = [&](const std::string& why) {
    return InvalidArgument("--inject " + spec + ": " + why +
                           "; want hang:RANK@SEQ, exit:RANK@SEQ, slow:RANK@SEQ:MS or mismatch:RANK@SEQ");
  };
  const size_t colon = spec.find(':');
  const size_t at = spec.find('@');
  if (colon == std::string::npos || at == std::string::npos || at < colon) throw bad("malformed");
  const std::string kind = spec.substr(0, colon);
  Injection inj{Injection::Hang};
  if (kind == "hang") inj.kind = Injection::Hang;
  else if (kind == "exit") inj.kind = Injection::Exit;
  else if (kind == "slow") inj.kind = Injection::Slow;
  else if (kind == "mismatch") inj.kind = Injection::Mismatch;
  else throw bad("unknown kind '" + kind + "'");
  try {
    inj.rank = std::stoi(spec.substr(colon + 1, at - colon - 1));
    const std::string rest = spec.substr(at + 1);
    const size_t msColon = rest.find(':');
    inj.seq = std::stoull(rest.substr(0, msColon));
    if (inj.kind == Injection::Slow) {
      if (msColon == std::string::npos) throw bad("slow needs :MS");
      inj.ms = std::stoll(rest.substr(msColon + 1));
    } else if (msColon != std::string::npos) {
      throw bad("only slow takes :MS");
    }
  } catch (const std::logic_error&) {
    throw bad("RANK, SEQ and MS must be numbers");
  }
  if (inj.rank < 0 || inj.seq < 1 || inj.ms < 0) throw bad("RANK >= 0, SEQ >= 1 and MS >= 0");
  return inj;
}

WorkPtr Injector::act(ProcessGroup& pg) {
  const uint64_t next = pg.seq() + 1;
  for (const auto& inj : injections_) {
    if (inj.rank != pg.rank() || inj.seq != next) continue;
    const std::string where = "[bench rank " + std::to_string(pg.rank()) + "] --inject at seq " + std::to_string(next);
    switch (inj.kind) {
      case Injection::Hang:
        std::fprintf(stderr, "%s: hanging (until killed)\n", where.c_str());
        for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
      case Injection::Exit:
        std::fprintf(stderr, "%s: exiting silently\n", where.c_str());
        Logger::flushAll();
        std::fflush(nullptr);
        ::_exit(0);
      case Injection::Slow:
        std::fprintf(stderr, "%s: sleeping %lld ms\n", where.c_str(), static_cast<long long>(inj.ms));
        std::this_thread::sleep_for(std::chrono::milliseconds(inj.ms));
        break;
      case Injection::Mismatch: {
        std::fprintf(stderr, "%s: issuing a 3-element allreduce instead\n", where.c_str());
        mismatched_ = Tensor::empty({3}, DType::Float32);
        return pg.allreduce(mismatched_);
      }
    }
  }
  return nullptr;
}

}  // namespace commhost::cli
