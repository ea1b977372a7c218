// SPDX-License-Identifier: Apache-2.0
#include "placement.h"

#include <sched.h>

namespace commhost::gloo_backend {

std::optional<Placement> plan(ThreadPlacement mode, int ranksSharing, const std::vector<int>& cpus) {
  const int n = static_cast<int>(cpus.size());
  if (mode == ThreadPlacement::Off || n < 2) return std::nullopt;
  if (mode == ThreadPlacement::Auto && n >= 2 * ranksSharing) return std::nullopt;
  // Only the 2-CPU case is measured (README); halves are its plain generalisation. The
  // transport threads get the upper half: a launcher's own binding usually fills CPUs
  // from 0 up.
  Placement placement;
  placement.workers.assign(cpus.begin(), cpus.begin() + n / 2);
  placement.transport.assign(cpus.begin() + n / 2, cpus.end());
  return placement;
}

bool pinCurrentThread(const std::vector<int>& cpus) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int cpu : cpus) CPU_SET(cpu, &set);
  return ::sched_setaffinity(0, sizeof(set), &set) == 0;
}

std::string cpuList(const std::vector<int>& cpus) {
  std::string out;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!out.empty()) out += ",";
    out += std::to_string(cpus[i]);
    if (j > i) out += "-" + std::to_string(cpus[j]);
    i = j + 1;
  }
  return out;
}

std::string Placement::describe() const {
  return "transport thread on CPU " + cpuList(transport) + ", op workers on CPU " + cpuList(workers);
}

}  // namespace commhost::gloo_backend
