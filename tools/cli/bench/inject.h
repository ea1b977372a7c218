// SPDX-License-Identifier: Apache-2.0
// Fault injection for `commhost bench --inject` (rehearsals and the supervisor's tests):
//   hang:RANK@SEQ      RANK blocks forever before issuing collective SEQ (its threads stay
//                      alive, so its heartbeat goes on: the supervisor's timeout must catch it)
//   exit:RANK@SEQ      RANK vanishes before SEQ: _exit(0), so `commhost run` does not stop
//                      the job itself and the survivors' heartbeat must notice
//   slow:RANK@SEQ:MS   RANK sleeps MS milliseconds before issuing SEQ
//   mismatch:RANK@SEQ  RANK issues a 3-element allreduce as SEQ instead of the bench's op
// SEQ counts every collective of the world group, as the flight recorder shows them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "commhost/process_group.h"

namespace commhost::cli {

struct Injection {
  enum Kind { Hang, Exit, Slow, Mismatch } kind;
  int rank = 0;
  uint64_t seq = 0;
  int64_t ms = 0;
};

// Throws InvalidArgument naming the spec and the accepted forms.
Injection parseInjection(const std::string& spec);

class Injector {
 public:
  explicit Injector(std::vector<Injection> injections) : injections_(std::move(injections)) {}
  // Before each collective: acts on the injections for this rank and the next seq.
  // Returns a work when it issued the collective itself (mismatch), null otherwise.
  // Inline for the common case, none: this runs in every timed iteration (~40
  // instructions of an 8 B op's ~1800 as a call that scanned an empty list).
  WorkPtr before(ProcessGroup& pg) { return injections_.empty() ? nullptr : act(pg); }

 private:
  WorkPtr act(ProcessGroup& pg);
  std::vector<Injection> injections_;
  Tensor mismatched_;  // the mismatch's buffer, alive until its work is waited for
};

}  // namespace commhost::cli
