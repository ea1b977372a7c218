// SPDX-License-Identifier: Apache-2.0
#include "intra_setup.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <sstream>

#include "commhost/errors.h"
#include "commhost/sdk/backend_sdk.h"

namespace commhost::nccl_backend {

namespace {

// One line per field, so no field may hold a newline (host names and NVML's messages do
// not; a stray one is flattened rather than trusted).
std::string oneLine(std::string s) {
  std::replace(s.begin(), s.end(), '\n', ' ');
  return s;
}

[[noreturn]] void malformed(const std::string& text, const std::string& why) {
  raise(ErrorCode::Backend, {}, "a peer's intra_node setup record is malformed (" + why + "): '" + oneLine(text) + "'",
        "every rank must run the same commhost build; another job may share this store prefix");
}

}  // namespace

std::string normalizeBusId(const std::string& busId) {
  unsigned domain = 0, bus = 0, device = 0, function = 0;
  char tail = 0;
  if (std::sscanf(busId.c_str(), "%x:%x:%x.%x%c", &domain, &bus, &device, &function, &tail) != 4) return "";
  char out[32];
  std::snprintf(out, sizeof(out), "%04x:%02x:%02x.%x", domain, bus, device, function);
  return out;
}

kernels::NvlMesh nvlMeshFromLinks(const std::vector<std::string>& busIds,
                                  const std::vector<std::optional<std::vector<NvLinkEnd>>>& links) {
  const size_t n = busIds.size();
  if (links.size() != n) return {};
  for (const auto& l : links)
    if (!l) return {};
  std::map<std::string, size_t> rankOf;
  for (size_t r = 0; r < n; ++r) rankOf.emplace(normalizeBusId(busIds[r]), r);
  kernels::NvlMesh mesh(n, std::vector<int>(n, 0));
  std::vector<int> switchLinks(n, 0);
  for (size_t i = 0; i < n; ++i)
    for (const NvLinkEnd& end : *links[i]) {
      if (end.kind == NvLinkEnd::Kind::Switch) {
        ++switchLinks[i];
      } else if (end.kind == NvLinkEnd::Kind::Gpu) {
        const auto it = rankOf.find(normalizeBusId(end.busId));
        if (it != rankOf.end() && it->second != i) ++mesh[i][it->second];
      }
    }
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j < n; ++j)
      if (i != j) mesh[i][j] += std::min(switchLinks[i], switchLinks[j]);
  return mesh;
}

std::string encodeRankInfo(const RankInfo& info) {
  std::ostringstream out;
  out << "intra1\n"
      << oneLine(info.host) << '\n'
      << oneLine(info.process) << '\n'
      << oneLine(info.busId) << '\n'
      << info.smCount << '\n';
  if (info.links) out << "nvml ok\n";
  else out << "nvml no " << oneLine(info.nvmlWhy) << '\n';
  for (const NvLinkEnd& l : info.links ? *info.links : std::vector<NvLinkEnd>{}) {
    if (l.kind == NvLinkEnd::Kind::Gpu) out << "gpu " << oneLine(l.busId) << '\n';
    else out << (l.kind == NvLinkEnd::Kind::Switch ? "switch\n" : "other\n");
  }
  return out.str();
}

RankInfo decodeRankInfo(const std::string& text) {
  std::istringstream in(text);
  std::string line;
  std::vector<std::string> lines;
  while (std::getline(in, line)) lines.push_back(line);
  if (lines.size() < 6 || lines[0] != "intra1") malformed(text, "not an intra1 record");
  RankInfo info;
  info.host = lines[1];
  info.process = lines[2];
  info.busId = lines[3];
  try {
    info.smCount = std::stoi(lines[4]);
  } catch (const std::exception&) {
    malformed(text, "SM count '" + lines[4] + "'");
  }
  if (lines[5] == "nvml ok") info.links.emplace();
  else if (lines[5].rfind("nvml no ", 0) == 0) info.nvmlWhy = lines[5].substr(8);
  else malformed(text, "NVML line '" + lines[5] + "'");
  for (size_t i = 6; i < lines.size(); ++i) {
    if (!info.links) malformed(text, "links without an NVML reading");
    NvLinkEnd end;
    if (lines[i].rfind("gpu ", 0) == 0) {
      end.kind = NvLinkEnd::Kind::Gpu;
      end.busId = lines[i].substr(4);
    } else if (lines[i] == "switch") {
      end.kind = NvLinkEnd::Kind::Switch;
    } else if (lines[i] != "other") {
      malformed(text, "link '" + lines[i] + "'");
    }
    info.links->push_back(end);
  }
  return info;
}

std::string checkGroup(const std::vector<RankInfo>& all) {
  for (size_t r = 0; r < all.size(); ++r) {
    if (normalizeBusId(all[r].busId).empty())
      return "rank " + std::to_string(r) + " reported the PCI bus id '" + all[r].busId + "', which does not parse";
    if (all[r].host != all[0].host)
      return "ranks 0 and " + std::to_string(r) + " run on different hosts ('" + all[0].host + "', '" + all[r].host +
             "'): intra_node serves groups within one host";
    for (size_t q = 0; q < r; ++q)
      if (normalizeBusId(all[q].busId) == normalizeBusId(all[r].busId))
        return "ranks " + std::to_string(q) + " and " + std::to_string(r) + " use the same GPU (" + all[r].busId +
               "): give every rank its own device";
  }
  return "";
}

std::string checkAccess(const std::vector<RankInfo>& all, int rank,
                        const std::function<std::string(const std::string& busId)>& canAccess) {
  for (size_t r = 0; r < all.size(); ++r) {
    if (static_cast<int>(r) == rank) continue;
    if (std::string why = canAccess(normalizeBusId(all[r].busId)); !why.empty())
      return "its GPU (" + all[static_cast<size_t>(rank)].busId + ") cannot map rank " + std::to_string(r) +
             "'s GPU (" + all[r].busId + "): " + why;
  }
  return "";
}

Agreement agree(const BackendContext& ctx, const std::string& key, const Verdict& mine) {
  const std::vector<std::string> all = exchangeAll(ctx, key, (mine.ok ? "1" : "0") + mine.text, "intra_node setup");
  Agreement out;
  out.ok = true;
  for (size_t r = 0; r < all.size(); ++r) {
    const std::string& v = all[r];
    if (!v.empty() && v[0] == '1') {
      out.payloads.push_back(v.substr(1));
      continue;
    }
    out.ok = false;
    out.reason = "rank " + std::to_string(r) + ": " + (v.empty() ? std::string("(no answer)") : v.substr(1));
    out.payloads.clear();
    break;
  }
  return out;
}

std::string toHex(const void* data, size_t size) {
  static const char* digits = "0123456789abcdef";
  const auto* p = static_cast<const uint8_t*>(data);
  std::string out;
  out.reserve(size * 2);
  for (size_t i = 0; i < size; ++i) {
    out.push_back(digits[p[i] >> 4]);
    out.push_back(digits[p[i] & 15]);
  }
  return out;
}

bool fromHex(const std::string& hex, void* data, size_t size) {
  if (hex.size() != size * 2) return false;
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  auto* p = static_cast<uint8_t*>(data);
  for (size_t i = 0; i < size; ++i) {
    const int hi = nibble(hex[2 * i]), lo = nibble(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    p[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  return true;
}

}  // namespace commhost::nccl_backend
