// SPDX-License-Identifier: Apache-2.0
#include "environment.h"

#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <cstring>

#include "commhost/errors.h"
#include "commhost/process_group.h"

extern char** environ;

namespace commhost {
namespace config {

std::optional<std::string> readEnv(const char* name) {
  const char* v = std::getenv(name);
  if (!v) return std::nullopt;
  return std::string(v);
}

std::vector<std::pair<std::string, std::string>> commhostVariables() {
  std::vector<std::pair<std::string, std::string>> out;
  for (char** e = environ; e && *e; ++e) {
    if (std::strncmp(*e, "COMMHOST_", 9) != 0) continue;
    const char* eq = std::strchr(*e, '=');
    if (!eq) continue;
    out.emplace_back(std::string(static_cast<const char*>(*e), eq), std::string(eq + 1));
  }
  return out;
}

bool isReservedVariable(const std::string& name) {
  return name == "COMMHOST_CONFIG" || name == "COMMHOST_PLUGIN_PATH" || name == "COMMHOST_STORE_TOKEN" ||
         name == "COMMHOST_OVERRIDES" || name == "COMMHOST_CONFIG_TEXT" || name == "COMMHOST_LAUNCH_REPORT_FD";
}

std::string variableForKey(const std::string& key) {
  std::string out = "COMMHOST_";
  for (char c : key)
    out += std::isalnum(static_cast<unsigned char>(c)) ? static_cast<char>(std::toupper(static_cast<unsigned char>(c)))
                                                       : '_';
  return out;
}

std::vector<std::string> overridesFromEnv() {
  std::vector<std::string> out;
  const auto value = readEnv("COMMHOST_OVERRIDES");
  if (!value) return out;
  size_t start = 0;
  while (start < value->size()) {
    size_t nl = value->find('\n', start);
    if (nl == std::string::npos) nl = value->size();
    if (nl > start) out.push_back(value->substr(start, nl - start));
    start = nl + 1;
  }
  return out;
}

std::string defaultDumpDir() {
  std::string dir = readEnv("TMPDIR").value_or("");
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  // Per user: jobs of different users on one host must not write into (or be refused by)
  // each other's directory.
  return (dir.empty() ? std::string("/tmp") : dir) + "/commhost-traces-" + std::to_string(::getuid());
}

std::vector<std::string> pluginPathFromEnv() {
  std::vector<std::string> dirs;
  const auto value = readEnv("COMMHOST_PLUGIN_PATH");
  if (!value) return dirs;
  size_t start = 0;
  while (start <= value->size()) {
    const size_t colon = value->find(':', start);
    const std::string dir = value->substr(start, colon == std::string::npos ? std::string::npos : colon - start);
    if (!dir.empty()) dirs.push_back(dir);
    if (colon == std::string::npos) break;
    start = colon + 1;
  }
  return dirs;
}

namespace {

std::optional<int> intVar(const char* name) {
  const auto v = readEnv(name);
  if (!v || v->empty()) return std::nullopt;
  try {
    size_t used = 0;
    const int n = std::stoi(*v, &used);
    if (used == v->size() && n >= 0) return n;
  } catch (const std::exception&) {
  }
  throw ConfigError(std::string("environment variable ") + name + "='" + *v +
                    "' is not a non-negative integer; fix the launcher's environment");
}

}  // namespace

std::string firstSlurmHost(const std::string& list) {
  // "node[01-04,07],gpu5": the prefix before the first '[' or ',', then the first range's
  // first number as written (zero padding kept).
  const size_t stop = list.find_first_of("[,");
  if (stop == std::string::npos || list[stop] == ',') return list.substr(0, stop);
  const size_t end = list.find_first_of("-,]", stop + 1);
  if (end == std::string::npos) return "";
  return list.substr(0, stop) + list.substr(stop + 1, end - stop - 1);
}

}  // namespace config

LaunchInfo detectLaunch() {
  using config::intVar;
  using config::readEnv;
  LaunchInfo info;
  // torchrun / commhost run first: they are the most explicit.
  if (auto rank = intVar("RANK")) {
    info.launcher = "torchrun";
    info.rank = *rank;
    info.worldSize = intVar("WORLD_SIZE").value_or(1);
    info.localRank = intVar("LOCAL_RANK").value_or(info.rank);
    info.localWorldSize = intVar("LOCAL_WORLD_SIZE").value_or(info.worldSize);
  } else if (auto ompiRank = intVar("OMPI_COMM_WORLD_RANK")) {
    info.launcher = "openmpi";
    info.rank = *ompiRank;
    info.worldSize = intVar("OMPI_COMM_WORLD_SIZE").value_or(1);
    info.localRank = intVar("OMPI_COMM_WORLD_LOCAL_RANK").value_or(0);
    info.localWorldSize = intVar("OMPI_COMM_WORLD_LOCAL_SIZE").value_or(info.worldSize);
  } else if (auto pmiRank = intVar("PMI_RANK")) {
    // MPICH's and Intel MPI's Hydra (mpiexec) set PMI_*; Open MPI sets OMPI_* above.
    info.launcher = "pmi";
    info.rank = *pmiRank;
    info.worldSize = intVar("PMI_SIZE").value_or(1);
    info.localRank = intVar("MPI_LOCALRANKID").value_or(0);
    info.localWorldSize = intVar("MPI_LOCALNRANKS").value_or(info.worldSize);
  } else if (auto slurmRank = intVar("SLURM_PROCID")) {
    info.launcher = "slurm";
    info.rank = *slurmRank;
    info.worldSize = intVar("SLURM_NTASKS").value_or(1);
    info.localRank = intVar("SLURM_LOCALID").value_or(0);
    // SLURM_NTASKS_PER_NODE is set only with --ntasks-per-node; otherwise the node count
    // tells whether the tasks share one host (the multi_host feature check reads this).
    const int nodes = intVar("SLURM_JOB_NUM_NODES").value_or(intVar("SLURM_NNODES").value_or(1));
    info.localWorldSize = intVar("SLURM_NTASKS_PER_NODE")
                              .value_or(nodes <= 1 ? info.worldSize : (info.worldSize + nodes - 1) / nodes);
  } else {
    info.launcher = "none";
  }
  if (info.worldSize < 1 || info.rank >= info.worldSize)
    throw ConfigError("launch environment (" + info.launcher + ") gives rank " + std::to_string(info.rank) +
                      " of world size " + std::to_string(info.worldSize) +
                      "; rank must be below the world size. Fix the launcher's variables");
  info.masterAddr = readEnv("MASTER_ADDR").value_or("");
  info.masterPort = intVar("MASTER_PORT").value_or(0);
  if (info.launcher == "slurm") {
    // As torch's Slurm environments do: the step's first host serves the store, on a
    // port derived from the job id, so `srun commhost ...` needs no exports; MASTER_ADDR
    // and MASTER_PORT still win.
    if (info.masterAddr.empty())
      info.masterAddr = config::firstSlurmHost(
          readEnv("SLURM_STEP_NODELIST").value_or(readEnv("SLURM_JOB_NODELIST").value_or("")));
    if (info.masterPort == 0)
      if (auto job = intVar("SLURM_JOB_ID")) info.masterPort = 29500 + *job % 10000;
  }
  info.configPath = readEnv("COMMHOST_CONFIG").value_or("");
  info.reportFd = intVar("COMMHOST_LAUNCH_REPORT_FD").value_or(-1);
  return info;
}

namespace config {

std::optional<std::string> launchConfigText(const std::string& path) {
  const auto file = readEnv("COMMHOST_CONFIG");
  if (!file || path.empty() || *file != path) return std::nullopt;
  return readEnv("COMMHOST_CONFIG_TEXT");
}

}  // namespace config

}  // namespace commhost
