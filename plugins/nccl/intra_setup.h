// SPDX-License-Identifier: Apache-2.0
// The device-independent half of the intra-node setup (intra_comm.h), unit-tested without
// a GPU: what each rank reports about itself, the NVLink matrix built from every rank's
// NVML reading, the checks a rank makes of its peers, and the all-or-nothing agreement
// through the backend's store (intra is used only when every rank can take part).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "commhost/kernels/intra_node.h"
#include "commhost/sdk/plugin.h"

namespace commhost::nccl_backend {

// One NVLink of a device, as NVML reports it.
struct NvLinkEnd {
  enum class Kind { Gpu, Switch, Other };
  Kind kind = Kind::Other;
  std::string busId;  // the remote GPU (Kind::Gpu), normalized
};

// "0000:07:00.0" from NVML's "00000000:07:00.0", CUDA's "0000:07:00.0" or either in
// upper case; "" when it is not domain:bus:device.function in hex.
std::string normalizeBusId(const std::string& busId);

// The NVLink matrix of the ranks' devices (rank order) from each rank's own reading:
// [i][j] counts i's links whose far end is j's GPU, plus min(i's switch links, j's switch
// links) (on an NVSwitch system every GPU reaches every other through the switches; as
// intra_node_comm counts them). Empty when any rank has no reading (NVML missing there),
// which detectTopology() calls unknown.
kernels::NvlMesh nvlMeshFromLinks(const std::vector<std::string>& busIds,
                                  const std::vector<std::optional<std::vector<NvLinkEnd>>>& links);

// What a rank tells its peers first.
struct RankInfo {
  std::string host;     // hostIdentity()
  std::string process;  // unique per process: peers in this process are mapped directly,
                        // since CUDA IPC cannot open a handle in the process that made it
  std::string busId;    // normalized
  int smCount = 0;
  std::optional<std::vector<NvLinkEnd>> links;  // nullopt: NVML could not read them
  std::string nvmlWhy;                          // why not, when nullopt
};
std::string encodeRankInfo(const RankInfo& info);
RankInfo decodeRankInfo(const std::string& text);  // throws BackendError when malformed

// Whether the ranks can work together at all: "" or why not (ranks on other hosts, a GPU
// shared by two ranks, a bus id that does not parse). The same answer on every rank,
// since every rank decides it from the same records.
std::string checkGroup(const std::vector<RankInfo>& all);
// Whether `rank` can map every peer's device: "" or why not. canAccess(busId): "" when
// this rank's device can map the memory of the device with that bus id, else why not
// (the device is hidden from this process, no peer access between the two).
std::string checkAccess(const std::vector<RankInfo>& all, int rank,
                        const std::function<std::string(const std::string& busId)>& canAccess);

// A rank's answer in one phase of the setup: ok with a payload (e.g. its IPC handle), or
// not with the reason.
struct Verdict {
  bool ok = false;
  std::string text;
};
struct Agreement {
  bool ok = false;                    // every rank said ok
  std::string reason;                 // else "rank R: <its reason>" for the lowest such R
  std::vector<std::string> payloads;  // every rank's payload, rank order (when ok)
};
// Publishes `mine` under `key` (exchangeAll) and combines every rank's: the same answer
// on every rank. Throws what exchangeAll throws (a rank missing: TimeoutError).
Agreement agree(const BackendContext& ctx, const std::string& key, const Verdict& mine);

// Bytes <-> lowercase hex, for IPC handles and pointers in store values.
std::string toHex(const void* data, size_t size);
bool fromHex(const std::string& hex, void* data, size_t size);  // false when malformed

}  // namespace commhost::nccl_backend
