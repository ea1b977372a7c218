// SPDX-License-Identifier: Apache-2.0
#include "tuned_routes.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "commhost/sdk/option_schema.h"
#include "timing.h"

namespace commhost::cli {
namespace {

bool names(const std::vector<OpType>& ops, const std::string& op) {
  for (OpType o : ops)
    if (op == opName(o)) return true;
  return false;
}

// A route of the original config that the new routes replace: it names one of `ops` on
// `device` and nothing narrower than a byte range (a dtype or reduce op route is more
// specific than the new ones, so it stays and wins for its dtype).
bool replaced(const YAML::Node& route, DeviceType device, const std::vector<OpType>& ops) {
  if (!route.IsMap() || !route["op"] || !route["device"] || route["dtype"] || route["reduce_op"]) return false;
  return route["device"].as<std::string>() == deviceTypeName(device) && names(ops, route["op"].as<std::string>());
}

// `yaml` with its routes for `ops` on `device` replaced by `added`.
YAML::Node withRoutes(const std::string& yaml, DeviceType device, const std::vector<OpType>& ops,
                      const std::vector<YAML::Node>& added) {
  YAML::Node root = YAML::Load(yaml);
  YAML::Node routes(YAML::NodeType::Sequence);
  for (const auto& r : added) routes.push_back(r);
  if (root["routes"] && root["routes"].IsSequence())
    for (const auto& r : root["routes"])
      if (!replaced(r, device, ops)) routes.push_back(r);
  root["routes"] = routes;
  return root;
}

YAML::Node route(DeviceType device, OpType op, const TunedRange& range) {
  YAML::Node n(YAML::NodeType::Map);
  n.SetStyle(YAML::EmitterStyle::Flow);
  n["device"] = deviceTypeName(device);
  n["op"] = opName(op);
  if (range.minBytes > 0) n["min_bytes"] = formatSize(range.minBytes);
  if (range.maxBytes != INT64_MAX) n["max_bytes"] = formatSize(range.maxBytes);
  n["backend"] = range.backend;
  return n;
}

// `text` as comment lines, each of its own lines behind "#" (a reason can span lines).
std::string commented(const std::string& text, const char* lead) {
  std::string out = "#" + std::string(lead);
  for (char ch : text) out += ch == '\n' ? "\n#" + std::string(lead) : std::string(1, ch);
  return out + "\n";
}

// Relative plugin_path folders made absolute against `configDir` (the original file's
// folder): the text is loaded from memory, or written elsewhere.
void absolutePluginPaths(YAML::Node& root, const std::string& configDir) {
  if (!root["plugin_path"] || configDir.empty()) return;
  const auto absolute = [&](const std::string& p) {
    return std::filesystem::path(p).is_absolute() ? p : (std::filesystem::path(configDir) / p).string();
  };
  if (root["plugin_path"].IsSequence()) {
    YAML::Node paths(YAML::NodeType::Sequence);
    for (const auto& p : root["plugin_path"]) paths.push_back(absolute(p.as<std::string>()));
    root["plugin_path"] = paths;
  } else {
    root["plugin_path"] = absolute(root["plugin_path"].as<std::string>());
  }
}

std::string emit(const YAML::Node& root) {
  YAML::Emitter out;
  out << root;
  return std::string(out.c_str()) + "\n";
}

}  // namespace

double medianUs(const CandidateTimes& c) { return c.roundUs.empty() ? 0 : median(c.roundUs); }

int winner(const SizeTimes& size) {
  int best = -1;
  for (size_t i = 0; i < size.candidates.size(); ++i) {
    const auto& c = size.candidates[i];
    if (c.wrong != 0 || c.roundUs.empty()) continue;
    if (best < 0 || medianUs(c) < medianUs(size.candidates[best])) best = static_cast<int>(i);
  }
  return best;
}

std::vector<TunedRange> tunedRanges(const OpTimes& op) {
  std::vector<TunedRange> out;
  for (const auto& size : op.sizes) {
    const int w = winner(size);
    if (w < 0) continue;
    const std::string& backend = size.candidates[w].backend;
    if (!out.empty() && out.back().backend == backend) {
      out.back().maxBytes = size.bytes;
      continue;
    }
    const int64_t from = out.empty() ? 0 : out.back().maxBytes + 1;
    out.push_back({from, size.bytes, backend});
  }
  if (!out.empty()) out.back().maxBytes = INT64_MAX;
  return out;
}

std::vector<std::string> timesTable(const OpTimes& op) {
  std::vector<std::string> lines;
  if (op.sizes.empty()) return lines;
  lines.push_back("  " + op.op + ", median us per iteration over the rounds (slowest rank), by the bytes routes count");
  char cell[64];
  std::snprintf(cell, sizeof cell, "  %12s", "bytes");
  std::string columns = cell;
  for (const auto& c : op.sizes.front().candidates) {
    std::snprintf(cell, sizeof cell, " %10s", c.backend.c_str());
    columns += cell;
  }
  lines.push_back(columns + "  -> route");
  for (const auto& size : op.sizes) {
    std::snprintf(cell, sizeof cell, "  %12lld", static_cast<long long>(size.bytes));
    std::string row = cell;
    for (const auto& c : size.candidates) {
      if (c.wrong != 0) std::snprintf(cell, sizeof cell, " %10s", "wrong");
      else std::snprintf(cell, sizeof cell, " %10.1f", medianUs(c));
      row += cell;
    }
    const int w = winner(size);
    lines.push_back(row + "  -> " + (w < 0 ? std::string("none right") : size.candidates[w].backend));
  }
  for (const auto& s : op.skipped) lines.push_back("  not measured: " + s);
  return lines;
}

std::string tunedConfigText(const std::string& originalYaml, const std::string& configDir, DeviceType device,
                            const std::vector<OpTimes>& ops, const std::vector<std::string>& header) {
  std::vector<YAML::Node> added;
  std::vector<OpType> tunedOps;
  std::string comment;
  for (const auto& line : header) comment += commented(line, " ");
  for (const auto& op : ops) {
    const auto ranges = tunedRanges(op);
    if (ranges.empty()) continue;
    for (OpType routed : op.routedOps) {
      tunedOps.push_back(routed);
      for (const auto& r : ranges) added.push_back(route(device, routed, r));
    }
    for (const auto& line : timesTable(op)) comment += commented(line, "");
  }
  YAML::Node root = withRoutes(originalYaml, device, tunedOps, added);
  absolutePluginPaths(root, configDir);
  return comment + emit(root);
}

std::string candidateConfigText(const std::string& originalYaml, const std::string& configDir, DeviceType device,
                                const std::vector<OpType>& routedOps, const std::vector<std::string>& candidates,
                                const std::string& first) {
  std::vector<YAML::Node> added;
  for (OpType op : routedOps) {
    // A list of its own per route: a shared node would be written as an anchor and alias.
    YAML::Node list(YAML::NodeType::Sequence);
    list.SetStyle(YAML::EmitterStyle::Flow);
    list.push_back(first);
    for (const auto& c : candidates)
      if (c != first) list.push_back(c);
    YAML::Node n(YAML::NodeType::Map);
    n.SetStyle(YAML::EmitterStyle::Flow);
    n["device"] = deviceTypeName(device);
    n["op"] = opName(op);
    n["backend"] = list;
    added.push_back(n);
  }
  YAML::Node root = withRoutes(originalYaml, device, routedOps, added);
  root.remove("tuner");  // the candidate must run where it is listed first, not where a tuner would put it
  absolutePluginPaths(root, configDir);
  return emit(root);
}

MeasuredTable measuredTable(const std::vector<OpTimes>& ops, int worldSize, DeviceType device, DType dtype,
                            ReduceOp::Kind reduceOp) {
  MeasuredTable t;
  t.worldSize = worldSize;
  t.device = device;
  t.dtype = dtype;
  t.reduceOp = reduceOp;
  for (const OpTimes& op : ops)
    for (OpType routed : op.routedOps) {
      MeasuredTable::Op out;
      out.op = routed;
      for (const SizeTimes& size : op.sizes) {
        MeasuredTable::Row row;
        row.bytes = size.bytes;
        for (const CandidateTimes& c : size.candidates)
          row.cells.push_back({c.backend, medianUs(c), c.wrong == 0 && !c.roundUs.empty()});
        out.rows.push_back(std::move(row));
      }
      t.ops.push_back(std::move(out));
    }
  return t;
}

}  // namespace commhost::cli
