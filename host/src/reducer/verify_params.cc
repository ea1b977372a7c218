// SPDX-License-Identifier: Apache-2.0
// The Reducer's construction-time check that every rank passed the same parameter list.
#include "verify_params.h"

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "../core/rank_name.h"
#include "commhost/errors.h"
#include "commhost/process_group.h"

namespace commhost::reducer {
namespace {

// One parameter as the ranks exchange it: ndim, the dims, dtype, device type. A rank
// with fewer parameters sends ndim = -1 for the ones it lacks.
constexpr int64_t kFields = 3 + Shape::kMaxDims;

void encode(const ParamInfo& p, int64_t* out) {
  out[0] = p.shape.ndim();
  for (int d = 0; d < Shape::kMaxDims; ++d) out[1 + d] = d < p.shape.ndim() ? p.shape[d] : 0;
  out[1 + Shape::kMaxDims] = static_cast<int64_t>(p.dtype);
  out[2 + Shape::kMaxDims] = static_cast<int64_t>(p.device.type);
}

std::string decode(const int64_t* in) {
  if (in[0] < 0) return "no such parameter";
  const int ndim = static_cast<int>(std::min<int64_t>(in[0], Shape::kMaxDims));
  Shape shape(in + 1, in + 1 + ndim);
  const auto dtype = static_cast<DType>(in[1 + Shape::kMaxDims]);
  const auto device = static_cast<DeviceType>(in[2 + Shape::kMaxDims]);
  const bool known = in[1 + Shape::kMaxDims] >= 0 && in[1 + Shape::kMaxDims] < kNumDTypes &&
                     in[2 + Shape::kMaxDims] >= 0 && in[2 + Shape::kMaxDims] < kNumDeviceTypes;
  if (!known) return shape.str() + " of an unknown dtype or device";
  return std::string(dtypeName(dtype)) + shape.str() + " on " + deviceTypeName(device);
}

// FNV-1a over the encoded parameters: equal lists give equal digests.
int64_t digestOf(const std::vector<ParamInfo>& params) {
  uint64_t h = 1469598103934665603ull;
  int64_t fields[kFields];
  for (const auto& p : params) {
    encode(p, fields);
    for (int64_t f : fields) {
      for (int b = 0; b < 8; ++b) {
        h ^= static_cast<uint64_t>(f >> (8 * b)) & 0xff;
        h *= 1099511628211ull;
      }
    }
  }
  return static_cast<int64_t>(h);
}

std::string rankList(const ProcessGroup& group, const std::vector<int>& ranks) {
  std::string out = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i) out += (i ? ", " : "") + rankName(ranks[i], group.globalRanks());
  return out;
}

}  // namespace

std::string describeParam(const std::vector<ParamInfo>& params, size_t index) {
  std::string out = "param " + std::to_string(index);
  if (index < params.size() && !params[index].name.empty()) out += " '" + params[index].name + "'";
  return out;
}

void verifyParamsAcrossRanks(ProcessGroup& group, const std::vector<ParamInfo>& params) {
  const int world = group.size();
  if (world == 1) return;
  ErrorContext where;
  where.group = group.name();
  where.rank = group.rank();
  where.op = "Reducer";

  // Round 1: (count, digest) from every rank; all ranks see the same table, so all take
  // the same branch below and the group's op order stays the same on every rank.
  Tensor mine = Tensor::empty({2}, DType::Int64);
  mine.data_as<int64_t>()[0] = static_cast<int64_t>(params.size());
  mine.data_as<int64_t>()[1] = digestOf(params);
  std::vector<Tensor> all(world);
  for (auto& t : all) t = Tensor::empty({2}, DType::Int64);
  group.allgather(all, mine)->wait();
  int64_t maxCount = 0;
  bool same = true;
  for (const auto& t : all) {
    maxCount = std::max(maxCount, t.data_as<int64_t>()[0]);
    same = same && t.data_as<int64_t>()[0] == all[0].data_as<int64_t>()[0] &&
           t.data_as<int64_t>()[1] == all[0].data_as<int64_t>()[1];
  }
  if (same) return;

  // Round 2: every rank's parameter descriptions, padded to the longest list.
  Tensor details = Tensor::empty({std::max<int64_t>(1, maxCount) * kFields}, DType::Int64);
  for (int64_t i = 0; i < maxCount; ++i) {
    int64_t* out = details.data_as<int64_t>() + i * kFields;
    if (i < static_cast<int64_t>(params.size())) encode(params[i], out);
    else std::fill(out, out + kFields, -1);
  }
  std::vector<Tensor> gathered(world);
  for (auto& t : gathered) t = Tensor::empty(details.shape(), DType::Int64);
  group.allgather(gathered, details)->wait();

  std::string counts;
  for (int r = 0; r < world; ++r)
    counts += (r ? ", " : "") + std::string("rank ") + rankName(r, group.globalRanks()) + ": " +
              std::to_string(all[r].data_as<int64_t>()[0]);
  for (int64_t i = 0; i < maxCount; ++i) {
    // Ranks grouped by what they have at index i, in rank order.
    std::map<std::string, std::vector<int>> byValue;
    std::vector<std::string> order;
    for (int r = 0; r < world; ++r) {
      const std::string value = decode(gathered[r].data_as<int64_t>() + i * kFields);
      if (!byValue.count(value)) order.push_back(value);
      byValue[value].push_back(r);
    }
    if (order.size() == 1) continue;
    std::string what = "the ranks passed different parameter lists (parameter counts " + counts + "); " +
                       describeParam(params, static_cast<size_t>(i)) + " differs: ";
    for (size_t k = 0; k < order.size(); ++k)
      what += (k ? "; " : "") + rankList(group, byValue[order[k]]) +
              (byValue[order[k]].size() == 1 ? " has " : " have ") + order[k];
    raise(ErrorCode::InvalidArgument, where, what,
          "every rank must construct its Reducer with the same parameters (shapes, dtypes, device types) in the "
          "same order");
  }
  // Same descriptions but different digests cannot happen; say so rather than go on.
  raise(ErrorCode::InvalidArgument, where, "the ranks' parameter digests differ (parameter counts " + counts + ")",
        "every rank must construct its Reducer with the same parameters in the same order");
}

}  // namespace commhost::reducer
